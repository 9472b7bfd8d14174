"""``l0``: Voita et al.'s Hard-Concrete gates on heads with an L0 penalty; closed heads are removed at the end.

Gate per head: z = clamp(sigmoid((log u - log(1-u) + log_alpha) / beta) * (r - l) + l, 0, 1),
u ~ U(0, 1) while training, and z = clamp(sigmoid(log_alpha) * (r - l) + l, 0, 1) when evaluating.
Penalty: lambda * sum_h P(z_h != 0) = lambda * sum_h sigmoid(log_alpha_h - beta * log(-l / r)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from heads.config import ConfigError
from heads.events import L0Gates
from heads.params import param as declared
from heads.strategies.base import Strategy
from heads.strategies.registry import register_strategy
from heads.surgery import head_layout, set_gates
from heads.surgery.families import family_of
from heads.surgery.model_sites import site_map
from heads.train.loop import Hook


@dataclass
class L0Params:
    lam: float = declared(0.0, ge=0)  # penalty weight lambda; 0 = do nothing
    temperature: float = declared(0.33, gt=0)
    stretch: tuple[float, float] = declared((-0.1, 1.1))
    init: float = declared(3.0)  # initial log_alpha: gates start open (P(open) ~ 1)
    lr: float = declared(0.0, ge=0)  # learning rate of the gate parameters; 0 = the run's
    prune_at_end: bool = True

    def check(self) -> None:
        low, high = self.stretch
        if not (low < 0 < 1 < high):
            raise ConfigError(f"strategy.params.stretch: {list(self.stretch)} must satisfy low < 0 < 1 < high")


class HardConcrete:
    """The gate distribution, as functions of ``log_alpha``."""

    def __init__(self, temperature: float, stretch: tuple[float, float]):
        self.beta, (self.low, self.high) = temperature, stretch

    def sample(self, log_alpha: torch.Tensor) -> torch.Tensor:
        u = torch.rand_like(log_alpha).clamp(1e-6, 1 - 1e-6)
        s = torch.sigmoid((u.log() - (-u).log1p() + log_alpha) / self.beta)
        return (s * (self.high - self.low) + self.low).clamp(0.0, 1.0)

    def deterministic(self, log_alpha: torch.Tensor) -> torch.Tensor:
        return (torch.sigmoid(log_alpha) * (self.high - self.low) + self.low).clamp(0.0, 1.0)

    def p_open(self, log_alpha: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(log_alpha - self.beta * math.log(-self.low / self.high))


class _Gates(Hook):
    def __init__(self, p: L0Params):
        self.p = p
        self.dist = HardConcrete(p.temperature, tuple(p.stretch))
        self.log_alpha: dict[str, torch.nn.Parameter] = {}
        self._optimizer: torch.optim.Optimizer | None = None  # the one the gate parameters belong to
        self._saved: dict | None = None  # a checkpoint's state, until on_resume re-attaches it

    def _attach(self, trainer, log_alpha: dict[str, list[float]], moments: dict[str, dict]) -> None:
        """Gate parameters in the model's site order, as their own optimizer group (own base rate, no decay).

        Site order, not the order a checkpoint's JSON lists them in (sorted keys): sampling draws the noise
        site by site from one random stream, so another order gives other gates after a resume.
        """
        device = next(trainer.model.parameters()).device  # beside the model's: a GPU run gates on the GPU
        self.log_alpha = {
            name: torch.nn.Parameter(torch.tensor(log_alpha[name], dtype=torch.float32, device=device))
            for name in head_layout(trainer.model)
            if name in log_alpha
        }
        base = self.p.lr or trainer.cfg.train.lr
        trainer.optimizer.add_param_group(
            {"params": list(self.log_alpha.values()), "lr": base, "base_lr": base, "weight_decay": 0.0}
        )
        for name, param in self.log_alpha.items():
            if moments.get(name):
                trainer.optimizer.state[param] = {
                    # AdamW keeps its step count on the host unless captured; the moments beside the gates
                    k: torch.tensor(v, dtype=torch.float32, device="cpu" if k == "step" else device)
                    for k, v in moments[name].items()
                }
        self._optimizer = trainer.optimizer

    def on_start(self, trainer) -> None:
        init = {name: [float(self.p.init)] * len(kept) for name, kept in head_layout(trainer.model).items() if kept}
        self._attach(trainer, init, {})
        self._set(trainer, self.dist.deterministic)

    def on_resume(self, trainer) -> None:
        # Before the first step, so the schedule sets this group's rate on it too (attaching lazily in
        # before_step ran one update at the unscheduled base rate: the resumed run drifted from step 12).
        self._attach(trainer, self._saved["log_alpha"], self._saved["optimizer"])
        self._saved = None

    def _set(self, trainer, fn) -> None:
        set_gates(trainer.model, {name: fn(la) for name, la in self.log_alpha.items()})

    def before_step(self, trainer) -> None:
        self._set(trainer, self.dist.sample)

    def penalty(self, trainer):
        return self.p.lam * sum(self.dist.p_open(la).sum() for la in self.log_alpha.values())

    def on_step_end(self, trainer) -> None:
        # Between steps (validation, checkpoints) the model carries its deterministic gates.
        with torch.no_grad():
            self._set(trainer, lambda la: self.dist.deterministic(la).detach())

    def on_end(self, trainer) -> None:
        with torch.no_grad():
            values = {name: self.dist.deterministic(la).detach() for name, la in self.log_alpha.items()}
        layout = head_layout(trainer.model)
        closed = {name: [layout[name][i] for i, z in enumerate(v.tolist()) if z == 0.0] for name, v in values.items()}
        open_values = {name: v[v > 0] for name, v in values.items()}
        set_gates(trainer.model, {name: None for name in values})
        if self.p.prune_at_end:
            trainer.prune(closed, reason="l0 gates closed")
        _fold_gates(trainer.model, open_values if self.p.prune_at_end else values)
        trainer.events.write(L0Gates(step=trainer.step, gates={k: v.tolist() for k, v in values.items()}).record())

    def state_dict(self) -> dict:
        # JSON holds float32 values exactly (each is a double in between), so the round trip is bit for bit.
        opt = {}
        if self._optimizer is not None:
            for name, param in self.log_alpha.items():
                state = self._optimizer.state.get(param, {})
                opt[name] = {k: v.tolist() for k, v in state.items() if torch.is_tensor(v)}
        return {"log_alpha": {k: v.detach().tolist() for k, v in self.log_alpha.items()}, "optimizer": opt}

    def load_state_dict(self, state: dict) -> None:
        self._saved = state


def _fold_gates(model, values: dict[str, torch.Tensor]) -> None:
    """Scale each kept head's output-projection columns by its final gate: the model computes what the
    gated model computed, with no gate left to carry."""
    family, sites = family_of(model), site_map(model)
    with torch.no_grad():
        for name, gate in values.items():
            if gate.numel() == 0:
                continue
            site = sites[name]
            o = family.projections(model, site).o
            scale = gate.repeat_interleave(site.head_dim).to(o.weight.dtype)
            o.weight.mul_(scale.view(1, -1))


@register_strategy("l0")
class L0(Strategy):
    """Voita's Hard-Concrete L0 gates (temperature 0.33, stretch (-0.1, 1.1)); closed heads removed at the end."""

    Params = L0Params
    acts_when = "lam > 0"

    def hooks(self, cfg):
        return [_Gates(self.params)] if self.params.lam > 0 else []
