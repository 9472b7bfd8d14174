"""Pruning mid-training slices AdamW state with the weights: the next step is the step of a model born small."""

import copy

import pytest
import torch
from conftest import TINY, batch_for, build, build_with_biases

from heads.surgery import apply_layout, head_layout, prune_heads, sites
from heads.surgery.families import LinearView, family_of

LR, DECAY = 1e-2, 0.1


def no_dropout(model):
    # The comparison is of optimizer arithmetic, not of dropout masks.
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        for attr in ("dropout", "attention_dropout", "activation_dropout", "layerdrop"):  # functional dropout
            if isinstance(getattr(m, attr, None), float):
                setattr(m, attr, 0.0)
    return model.train()


def step(model, opt, inputs):
    opt.zero_grad()
    model(**inputs).loss.backward()
    opt.step()


def head_rows(site, heads, kv=False) -> torch.Tensor:
    """Rows of a projection holding ``heads`` (original indices), computed independently of the library."""
    group = site.group_size if kv else 1
    units = sorted({h // group for h in heads})
    return torch.tensor([u * site.head_dim + i for u in units for i in range(site.head_dim)], dtype=torch.long)


def slicing(model, keep: dict[str, list[int]]) -> dict[str, tuple[int, torch.Tensor]]:
    """Parameter name -> (dim, index) that takes the full tensor to the pruned one."""
    family = family_of(model)
    by_id = {}
    for site in sites(model):
        proj = family.projections(model, site)
        q, kv = head_rows(site, keep[site.name]), head_rows(site, keep[site.name], kv=True)
        fused: dict[torch.nn.Module, list[tuple[int, torch.Tensor]]] = {}  # Conv1D -> (block, its kept columns)
        for lin, dim, rows in ((proj.q, 0, q), (proj.k, 0, kv), (proj.v, 0, kv), (proj.o, 1, q)):
            if isinstance(lin, LinearView):  # a window on a Conv1D (weight [in, out]): Linear's rows are its columns
                if dim == 1:
                    by_id[id(lin.layer.weight)] = (0, rows)
                else:
                    width = lin.layer.weight.shape[1] // lin.blocks
                    fused.setdefault(lin.layer, []).append((lin.block, rows + lin.block * width))
                continue
            by_id[id(lin.weight)] = (dim, rows)
            if dim == 0 and lin.bias is not None:
                by_id[id(lin.bias)] = (0, rows)
        for layer, blocks in fused.items():  # GPT-2's c_attn: q, k, v blocks side by side
            cols = torch.cat([c for _, c in sorted(blocks, key=lambda b: b[0])])
            by_id[id(layer.weight)] = (1, cols)
            by_id[id(layer.bias)] = (0, cols)
    return {name: by_id[id(p)] for name, p in model.named_parameters() if id(p) in by_id}


def cut(tensor: torch.Tensor, how) -> torch.Tensor:
    return tensor.clone() if how is None else tensor.index_select(*how)


@pytest.mark.parametrize(
    "family,kw",
    [*((name, {}) for name in sorted(TINY)), ("llama", {"heads": 8, "kv_heads": 2, "d": 64})],
    ids=[*sorted(TINY), "llama-gqa"],
)
def test_adamw_step_after_pruning_equals_step_of_model_born_pruned(family, kw):
    model = no_dropout(build_with_biases(family, **kw))
    inputs = batch_for(family)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=DECAY)
    for _ in range(3):
        step(model, opt, inputs)

    all_sites = sites(model)
    first, last = all_sites[0], all_sites[-1]
    remove = {first.name: list(range(first.group_size)) if first.group_size > 1 else [1, 2],
              last.name: list(range(last.num_heads))}  # one site loses every head
    full = copy.deepcopy(model)
    moments = {n: {k: v.clone() for k, v in opt.state[p].items()} for n, p in model.named_parameters()}
    prune_heads(model, remove, optimizer=opt)
    keep = head_layout(model)

    born = no_dropout(build_with_biases(family, **kw))
    apply_layout(born, keep)
    how = slicing(full, keep)
    with torch.no_grad():
        for name, p in born.named_parameters():
            p.copy_(cut(dict(full.named_parameters())[name], how.get(name)))
    born_opt = torch.optim.AdamW(born.parameters(), lr=LR, weight_decay=DECAY)
    for name, p in born.named_parameters():
        born_opt.state[p] = {
            k: v.clone() if k == "step" else cut(v, how.get(name)) for k, v in moments[name].items()
        }

    step(model, opt, inputs)
    step(born, born_opt, inputs)
    for (name, a), (_, b) in zip(model.named_parameters(), born.named_parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5), name
        for key in ("exp_avg", "exp_avg_sq") if a.requires_grad else ():  # frozen tensors have no state
            assert torch.allclose(opt.state[a][key], born_opt.state[b][key], atol=1e-7, rtol=1e-5), (name, key)


def test_optimizer_state_shrinks_with_the_model():
    model = no_dropout(build("llama", heads=8, d=64))
    inputs = batch_for("llama")
    opt = torch.optim.AdamW(model.parameters())
    step(model, opt, inputs)

    def state_numel():
        return sum(v.numel() for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.dim())

    before = state_numel()
    prune_heads(model, {s.name: range(4) for s in sites(model)}, optimizer=opt)
    # two moments x (q, k, v rows + o columns) x 4 heads of width 8 over d=64, per site
    assert state_numel() == before - 2 * len(sites(model)) * 4 * (4 * 8 * 64)
    step(model, opt, inputs)  # and training goes on with the same optimizer object


def test_pruning_while_an_old_graph_is_still_referenced():
    """A ``loss`` kept alive across the prune must not poison the next backward (autograd caches shapes)."""
    model = no_dropout(build("llama"))
    inputs = batch_for("llama")
    opt = torch.optim.AdamW(model.parameters())
    for i in range(3):
        loss = model(**inputs).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i == 0:
            prune_heads(model, {s.name: [0] for s in sites(model)}, optimizer=opt)
    assert sum(len(g["params"]) for g in opt.param_groups) == len(list(model.parameters()))
