"""Proxy derivatives for ops whose true gradient is zero or undefined.

Relu's gradient is 0 for negative inputs and Floor's is 0 everywhere, so a loss behind
them cannot move the values in front of them. Following NNSmith (after Bengio et al.'s
straight-through estimator), the backward pass of these ops uses a surrogate: slope 1
where the op follows its input, a small positive slope `ALPHA` where it is flat (each op
here rises overall, so the sign is positive). The forward value is the reference's own,
untouched: `y - (s - s)` subtracts an exact zero, which keeps a -0.0 (Ceil(-0.3)) negative
where adding it would turn it into +0.0 and point a divisor's margin loss the wrong way.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from generator.values.predicate import Attrs, operand

Tensors = list[torch.Tensor | None]
Reference = Callable[[Attrs, Tensors], list[torch.Tensor]]
Surrogate = Callable[[Attrs, Tensors], torch.Tensor]

ALPHA = 0.1
"""Slope of the proxy where the true derivative is zero; small, like LeakyRelu's, so the
proxy never pulls against the real gradient of the ops around it."""


def _clip_bounds(attrs: Attrs, ins: Tensors) -> tuple[torch.Tensor | float | None, torch.Tensor | float | None]:
    """Clip's bounds are inputs since opset 11, attributes before."""
    lo: torch.Tensor | float | None = ins[1] if len(ins) > 1 else attrs.get("min")
    hi: torch.Tensor | float | None = ins[2] if len(ins) > 2 else attrs.get("max")
    return lo, hi


def _clip(attrs: Attrs, ins: Tensors) -> torch.Tensor:
    x = operand(ins)
    lo, hi = _clip_bounds(attrs, ins)
    inner = x
    if lo is not None:
        inner = torch.maximum(inner, _bound(lo, x))
    if hi is not None:
        inner = torch.minimum(inner, _bound(hi, x))
    return inner + ALPHA * (x - inner)


def _bound(b: torch.Tensor | float, like: torch.Tensor) -> torch.Tensor:
    if isinstance(b, torch.Tensor):
        return b.detach().to(like.dtype)
    return torch.tensor(b, dtype=like.dtype)


def _flat_below(x: torch.Tensor, edge: float | torch.Tensor, inside: torch.Tensor) -> torch.Tensor:
    """`inside` above `edge`, slope ALPHA below it."""
    return torch.where(x > edge, inside, ALPHA * x)


def _hard_sigmoid(attrs: Attrs, ins: Tensors) -> torch.Tensor:
    lin: torch.Tensor = attrs.get("alpha", 0.2) * operand(ins) + attrs.get("beta", 0.5)
    inner = torch.clamp(lin, 0.0, 1.0)
    return inner + ALPHA * (lin - inner)


def _hard_swish(attrs: Attrs, ins: Tensors) -> torch.Tensor:
    x = operand(ins)
    return _flat_below(x, -3.0, x * torch.clamp(x / 6 + 0.5, 0.0, 1.0))


def _shrink(attrs: Attrs, ins: Tensors) -> torch.Tensor:
    x = operand(ins)
    return torch.where(x.abs() > attrs.get("lambd", 0.5), x, ALPHA * x)


SURROGATES: dict[str, Surrogate] = {
    "Relu": lambda a, ins: F.leaky_relu(operand(ins), ALPHA),
    "ThresholdedRelu": lambda a, ins: _flat_below(operand(ins), a.get("alpha", 1.0), operand(ins)),
    "HardSigmoid": _hard_sigmoid,
    "HardSwish": _hard_swish,
    "Shrink": _shrink,
    "Floor": lambda a, ins: operand(ins),
    "Ceil": lambda a, ins: operand(ins),
    "Round": lambda a, ins: operand(ins),
    "Sign": lambda a, ins: ALPHA * operand(ins),
    "Clip": _clip,
}


def with_proxy(op_type: str, reference: Reference) -> Reference:
    """The reference, with the surrogate's gradient when the first input carries one."""
    surrogate = SURROGATES.get(op_type)
    if surrogate is None:
        return reference

    def run(attrs: Attrs, ins: Tensors) -> list[torch.Tensor]:
        outs = reference(attrs, ins)
        x = ins[0]
        if x is None or not x.requires_grad or not x.is_floating_point():
            return outs
        s = surrogate(attrs, ins)
        return [outs[0].detach() - (s.detach() - s), *outs[1:]]

    return run
