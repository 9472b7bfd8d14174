"""Engine pieces: schedule, resumable batch order, dropout knobs, target metrics."""

import pytest
import torch
from conftest import FAMILIES, batch_for, build

from heads.surgery import install
from heads.tasks.batching import Batcher
from heads.train.dropout import get_dropout, set_dropout
from heads.train.metrics_log import steps_to_target, time_to_target
from heads.train.schedule import lr_at


def test_schedule_warms_up_then_decays():
    lrs = [lr_at(s, 1.0, 10, 100, "cosine") for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:], strict=False))
    assert lr_at(99, 1.0, 10, 100, "linear") < 0.02
    assert lr_at(39, 1.0, 10, 100, "inverse_sqrt") == pytest.approx(0.5)


def test_batcher_resumes_exactly():
    examples = list(range(23))
    collate = lambda xs: {"x": torch.tensor(xs)}  # noqa: E731
    a = Batcher(examples, 4, collate, seed=3)
    stream = [next(a)["x"].tolist() for _ in range(13)]  # crosses two epoch boundaries
    b = Batcher(examples, 4, collate, seed=3)
    for _ in range(6):
        next(b)
    state = b.state_dict()
    c = Batcher(examples, 4, collate, seed=99)
    c.load_state_dict(state)
    assert [next(c)["x"].tolist() for _ in range(7)] == stream[6:]
    with pytest.raises(ValueError, match="empty"):
        Batcher([], 4, collate, seed=0)


@pytest.mark.parametrize("family", ["llama", "bert", "marian"])
def test_dropout_knobs_are_separate_and_change_mid_run(family):
    model = build(family)
    set_dropout(model, attention=0.25, residual=0.0)
    assert get_dropout(model) == {"attention": 0.25, "residual": 0.0}
    set_dropout(model, residual=0.1)
    assert get_dropout(model) == {"attention": 0.25, "residual": 0.1}
    set_dropout(model, attention=0.0, residual=0.0)
    model.train()
    ids = torch.randint(2, 200, (2, 8))
    kw = {"decoder_input_ids": ids} if family == "marian" else {}
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids, **kw).logits, model(input_ids=ids, **kw).logits)
        set_dropout(model, residual=0.5)
        assert not torch.equal(model(input_ids=ids, **kw).logits, model(input_ids=ids, **kw).logits)


@pytest.mark.parametrize("family", FAMILIES)
def test_attention_dropout_acts_in_training_mode_only(family):
    """By its effect, on the gated attention training runs through: two forward passes differ in training
    mode and are identical in eval mode, where they equal the model without dropout."""
    model = install(build(family))
    inputs = {k: v for k, v in batch_for(family).items() if k != "labels"}
    set_dropout(model, attention=0.0, residual=0.0)
    with torch.no_grad():
        clean = model(**inputs).logits
        model.train()
        assert torch.equal(model(**inputs).logits, model(**inputs).logits)  # nothing random left: no other dropout
        set_dropout(model, attention=0.5)
        first, second = model(**inputs).logits, model(**inputs).logits
        assert not torch.allclose(first, second, atol=1e-4) and not torch.allclose(first, clean, atol=1e-4)
        model.eval()
        assert torch.equal(model(**inputs).logits, clean) and torch.equal(model(**inputs).logits, clean)


def test_time_and_steps_to_target():
    records = [
        {"step": 0, "train_seconds": 0.0, "val_loss": 5.0},
        {"step": 10, "train_seconds": 2.0},
        {"step": 20, "train_seconds": 4.0, "val_loss": 3.9},
        {"step": 30, "train_seconds": 6.0, "val_loss": 3.5},
    ]
    assert time_to_target(records, "val_loss", 4.0) == 4.0
    assert steps_to_target(records, "val_loss", 4.0) == 20
    assert steps_to_target(records, "val_loss", 1.0) is None


def test_pad_right_pads_every_row_as_a_row_by_row_copy_would():
    """The collate step's padding, built at once from all the ids, equals writing each row into a padded tensor:
    ids row-major, the pad value after each row's end, the mask 1 exactly over each row's ids."""
    import random

    import torch

    from heads.tasks.batching import pad

    rng = random.Random(0)
    for _ in range(200):
        seqs = [[rng.randrange(9000) for _ in range(rng.randint(0, 70))] for _ in range(rng.randint(1, 40))]
        seqs[0] = seqs[0] or [7]  # at least one id in the batch: a width of 0 is not a batch
        value = rng.choice([0, -100])
        ids, mask = pad(seqs, value)
        width = max(map(len, seqs))
        assert ids.dtype == mask.dtype == torch.long and ids.shape == mask.shape == (len(seqs), width)
        for row, s in enumerate(seqs):
            assert ids[row].tolist() == s + [value] * (width - len(s))
            assert mask[row].tolist() == [1] * len(s) + [0] * (width - len(s))
