"""Gates: all-open equals stock attention, 0 masks, grads are importance, stacking batches ablations."""

import pytest
import torch
from conftest import TINY, batch_for, build, logits

from heads.surgery import get_gates, install, ones_gates, repeat_batch, set_gates, sites
from heads.surgery.gates import gates


def test_open_gates_equal_stock_sdpa_on_padded_batch(family):
    model = build(family)
    inputs = batch_for(family)
    stock = logits(model, inputs)
    install(model)
    assert torch.equal(logits(model, inputs), stock)  # no gate set
    set_gates(model, ones_gates(model))
    assert torch.equal(logits(model, inputs), stock)  # all gates 1


def test_padding_is_respected(family):
    """Tokens under the padding change nothing the model outputs for the real tokens (the mask function is
    registered). A causal model is padded at the start: padded at the end, no real position would come after the
    padding to see it, and the test could not fail."""
    model = install(build(family))
    inputs = batch_for(family, batch=2)
    causal = TINY[family][1] == "causal"
    padded = slice(0, 4) if causal else slice(5, None)
    real = slice(4, None) if causal else slice(None)  # decoder positions and class logits: all real
    inputs["attention_mask"][1] = 1
    inputs["attention_mask"][1, padded] = 0
    garbage = {**inputs, "input_ids": inputs["input_ids"].clone()}
    garbage["input_ids"][1, padded] = 7
    assert torch.allclose(logits(model, garbage)[1, real], logits(model, inputs)[1, real], atol=1e-6)
    # ... and only the mask keeps them apart: unmasked, the real positions see the garbage
    unmasked = {"attention_mask": torch.ones_like(inputs["attention_mask"])}
    seen = logits(model, {**garbage, **unmasked})[1, real] - logits(model, {**inputs, **unmasked})[1, real]
    assert seen.abs().max() > 1e-5  # far beyond the 1e-6 the masked outputs are held to


def test_eager_path_matches_sdpa(family):
    model = install(build(family))
    inputs = batch_for(family)
    g = ones_gates(model)
    for gate in g.values():
        gate[1] = 0.0
    set_gates(model, g)
    fast = logits(model, inputs)
    install(model, eager=True)
    assert torch.allclose(logits(model, inputs), fast, atol=1e-5)


def test_closed_gate_equals_zeroed_output_columns(family):
    from heads.surgery.families import family_of

    model = install(build(family))
    inputs = batch_for(family)
    site = sites(model)[-1]
    g = ones_gates(model)
    g[site.name][2] = 0.0
    with gates(model, g):
        masked = logits(model, inputs)
    proj = family_of(model).projections(model, site)
    with torch.no_grad():
        proj.o.weight[:, 2 * site.head_dim : 3 * site.head_dim] = 0
    assert torch.allclose(logits(model, inputs), masked, atol=1e-6)


def test_gate_gradient_matches_finite_difference(family):
    model = install(build(family)).double()
    inputs = batch_for(family)
    g = {k: v.double().requires_grad_(True) for k, v in ones_gates(model).items()}
    set_gates(model, g)

    def loss() -> torch.Tensor:
        # In double end to end (the stock LM loss upcasts to float32, too coarse for differences).
        out = logits(model, inputs)
        return torch.nn.functional.cross_entropy(out.flatten(0, -2), inputs["labels"].flatten())

    loss().backward()
    # Check the head with the strongest signal (some heads of a random model barely matter).
    site, head = max(((n, int(v.grad.abs().argmax())) for n, v in g.items()), key=lambda nh: g[nh[0]].grad.abs().max())
    analytic = g[site].grad[head].item()
    eps = 1e-3  # Llama RMSNorm computes in float32 even for a double model: keep eps well above its noise
    values = []
    for sign in (1, -1):
        with torch.no_grad():
            probe = {k: v.detach().clone() for k, v in g.items()}
            probe[site][head] += sign * eps
            set_gates(model, probe)
            values.append(loss().item())
    numeric = (values[0] - values[1]) / (2 * eps)
    assert abs(numeric) > 1e-4  # a real signal, not 0 == 0
    assert analytic == pytest.approx(numeric, rel=1e-3, abs=1e-6)


def test_stacked_gates_equal_separate_forwards(family):
    model = install(build(family))
    inputs = {k: v for k, v in batch_for(family).items() if k != "labels"}
    site_names = [s.name for s in sites(model)]
    k = 4
    stacked = ones_gates(model, stack=k)
    # ablation j closes head j of the first site; the last one closes a head everywhere
    for j in range(3):
        stacked[site_names[0]][j, j] = 0.0
    for name in site_names:
        stacked[name][3, 1] = 0.0
    set_gates(model, stacked)
    together = model(**repeat_batch(inputs, k)).logits
    per = together.view(k, -1, *together.shape[1:])
    for j in range(k):
        set_gates(model, {name: stacked[name][j] for name in site_names})
        assert torch.allclose(model(**inputs).logits, per[j], atol=1e-5)


def test_gates_context_restores_previous():
    model = install(build("llama"))
    before = get_gates(model)
    with gates(model, ones_gates(model)):
        assert all(v is not None for v in get_gates(model).values())
    assert get_gates(model) == before


def test_clear_errors():
    model = build("llama")
    with pytest.raises(RuntimeError, match="install"):
        set_gates(model, ones_gates(model))
    install(model)
    with pytest.raises(KeyError, match="unknown site"):
        set_gates(model, {"nope": torch.ones(4)})
    with pytest.raises(ValueError, match="holds 4 heads"):
        set_gates(model, {sites(model)[0].name: torch.ones(3)})
