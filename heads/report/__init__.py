"""Reports: collect the run tree, render per-replication tables and figures, and the claims ledger.

``collect`` (run tree -> records) -> ``rows`` (records and analyses -> tidy rows, by the kinds declared in
``kinds``) -> ``measures`` (claim selectors -> per-seed values) -> ``stats`` (Student-t intervals, verdicts) ->
``claims`` (preconditions, CLAIMS.md, claims.csv); ``table_spec`` (tables declared in a replication's
report.yaml), ``tables`` (those built in) and ``figures`` render each replication; ``render`` ties one
replication together. Nothing here imports torch.
"""

from heads.report.claims import evaluate, evaluate_all, write_ledger
from heads.report.collect import RunTree
from heads.report.render import artefacts, render_replication, replications
from heads.report.spec import Claim, ClaimSpecError, load_all, load_claims

__all__ = [
    "Claim",
    "ClaimSpecError",
    "RunTree",
    "evaluate",
    "evaluate_all",
    "load_all",
    "load_claims",
    "artefacts",
    "render_replication",
    "replications",
    "write_ledger",
]
