"""Normalization ops: batch, layer, instance, group, Lp, mean-variance and local response.

Scales, biases and running statistics are owned by the op and emitted as initializers; the
running variance is a constant drawn positive, so the op is defined by construction. References
compute float16 in float32 and round once, as the backends' fused kernels do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from generator.dtypes import FLOATS_32_FIRST, DType
from generator.ops.base import OUTPUTS, Attrs, Emitter, SameShapeOp, axis_of, register
from generator.ops.nn import widen
from generator.symbolic import AbsTensor, Cond, SymCtx, TType, numel

EPSILONS = (1e-5, 1e-5, 1e-3, 0.1)


def _moments(x: torch.Tensor, dims: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and biased variance over `dims` (the variance every ONNX norm uses), dims kept."""
    mean = x.mean(dim=dims, keepdim=True)
    return mean, ((x - mean) ** 2).mean(dim=dims, keepdim=True)


def _standardize(x: torch.Tensor, dims: list[int], eps: float) -> torch.Tensor:
    """(x - mean) / sqrt(var + eps) over `dims`."""
    mean, var = _moments(x, dims)
    return (x - mean) / torch.sqrt(var + eps)


def _per_channel(t: torch.Tensor, rank: int) -> torch.Tensor:
    """A [C] parameter shaped to broadcast over [N, C, ...]."""
    return widen(t).reshape(1, -1, *[1] * (rank - 2))


class NormOp(SameShapeOp):
    """Shape-preserving, float-only, with a drawn epsilon (the default left implied at times)."""

    dtypes = FLOATS_32_FIRST
    max_rank = 5

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.epsilon = self.rng.choice(EPSILONS)
        self.explicit = self.epsilon != 1e-5 or self.rng.random() < 0.5

    def eps_attr(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon} if self.explicit else {}


@register
class BatchNormalization(NormOp):
    """Inference mode: normalised by owned running statistics."""

    op_type = "BatchNormalization"
    min_rank = 2

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.momentum = self.rng.random() < 0.3
        self.training_attr = self.rng.random() < 0.3

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        dtype = self.inputs[0].dtype
        c = em.ival(self.inputs[0].shape[1])
        variance = np.abs(em.values.normal(1.0, 0.5, size=c)) + 0.05
        params = [
            em.weight([c], dtype),
            em.weight([c], dtype),
            em.weight([c], dtype),
            em.const(variance.astype(dtype.numpy)),
        ]
        attrs = self.eps_attr()
        if self.momentum:
            attrs["momentum"] = 0.9
        if self.training_attr and em.opset >= 14:
            attrs["training_mode"] = 0
        em.node("BatchNormalization", [ins[0], *params], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, scale, bias, mean, var = inputs[:5]
        r = x.dim()
        eps = float(attrs.get("epsilon", 1e-5))
        if not attrs.get("training_mode", 0):
            # BatchNormalization-7 with spatial=0: one parameter per element of [C, D1, ...].
            param = _per_channel if attrs.get("spatial", 1) else (lambda t, _: widen(t).unsqueeze(0))
            y = (widen(x) - param(mean, r)) / torch.sqrt(param(var, r) + eps)
            return [(y * param(scale, r) + param(bias, r)).to(x.dtype)]
        # Training mode (opset 14+) is deterministic: the batch's own statistics normalise, and
        # the optional outputs are the running statistics moved toward them by 1 - momentum.
        batch_mean, batch_var = _moments(widen(x), [0, *range(2, r)])
        y = (widen(x) - batch_mean) / torch.sqrt(batch_var + eps)
        y = y * _per_channel(scale, r) + _per_channel(bias, r)
        momentum = float(attrs.get("momentum", 0.9))
        running_mean = widen(mean) * momentum + batch_mean.reshape(-1) * (1 - momentum)
        running_var = widen(var) * momentum + batch_var.reshape(-1) * (1 - momentum)
        return [y.to(x.dtype), running_mean.to(mean.dtype), running_var.to(var.dtype)]

    old_attrs = frozenset({"spatial"})

    @classmethod
    def refusal(cls, version: int, attrs: Attrs) -> str | None:
        """Before opset 14 a node with more than one output is in training mode, and its
        outputs (mean, var, saved_mean, saved_var) are not those the reference computes."""
        if version < 14 and attrs[OUTPUTS] > 1:
            return f"BatchNormalization-{version} training outputs (more than Y) are not computed"
        return super().refusal(version, attrs)


@register
class LayerNormalization(NormOp):
    """Normalises over the trailing dims from `axis`; Scale (and B, when present) has their shape."""

    op_type = "LayerNormalization"
    since_opset = 17

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.axis = self.rng.randint(-rank, rank - 1)
        self.bias = self.rng.random() < 0.7

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        shape = [em.ival(d) for d in x.shape[self.axis :]]
        operands = [ins[0], em.weight(shape, x.dtype)]
        if self.bias:
            operands.append(em.weight(shape, x.dtype))
        attrs = self.eps_attr()
        if self.axis != -1 or self.explicit:
            attrs["axis"] = self.axis
        em.node("LayerNormalization", operands, outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, scale = inputs[0], inputs[1]
        axis = axis_of(attrs, "axis", -1, x.dim())
        dims, eps = list(range(axis, x.dim())), float(attrs.get("epsilon", 1e-5))
        y = _standardize(widen(x), dims, eps) * widen(scale)
        if len(inputs) > 2 and inputs[2] is not None:
            y = y + widen(inputs[2])
        # The optional Mean and InvStdDev outputs, reduced dims kept, come in stash_type (float32
        # by default, whatever X is), the type onnx.checker and onnxruntime require of them.
        mean, var = _moments(widen(x), dims)
        stash = getattr(torch, DType.from_onnx(int(attrs.get("stash_type", 1))).value)
        return [y.to(x.dtype), mean.to(stash), (1 / torch.sqrt(var + eps)).to(stash)]


@register
class InstanceNormalization(NormOp):
    op_type = "InstanceNormalization"
    min_rank = 3

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        c = em.ival(x.shape[1])
        em.node(self.op_type, [ins[0], em.weight([c], x.dtype), em.weight([c], x.dtype)], outs, **self.eps_attr())

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, scale, bias = inputs[:3]
        r = x.dim()
        y = _standardize(widen(x), list(range(2, r)), float(attrs.get("epsilon", 1e-5)))
        return [(y * _per_channel(scale, r) + _per_channel(bias, r)).to(x.dtype)]


@register
class GroupNormalization(NormOp):
    """Channels split into `num_groups` groups, each standardised on its own, with per-channel
    scale and bias. Opset 18 had them per group, but onnx.checker rejects that deprecated
    version, so only the opset-21 form is generated; the reference still reads both, telling
    them apart by the parameters' length."""

    op_type = "GroupNormalization"
    since_opset = 21
    min_rank = 3

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.groups = self.rng.choice((1, 2, 2, 3, 4))

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [ins[0].shape[1] % self.groups == 0]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        c = em.ival(x.shape[1])
        attrs = {"num_groups": self.groups, **self.eps_attr(), **({"stash_type": 1} if self.explicit else {})}
        em.node(self.op_type, [ins[0], em.weight([c], x.dtype), em.weight([c], x.dtype)], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, scale, bias = inputs[:3]
        g, c, r = int(attrs["num_groups"]), x.shape[1], x.dim()
        grouped = widen(x).reshape(x.shape[0], g, -1)
        y = _standardize(grouped, [2], float(attrs.get("epsilon", 1e-5))).reshape(x.shape)
        if scale.numel() != c:  # opset 18-20: one scale and bias per group
            scale, bias = scale.repeat_interleave(c // g), bias.repeat_interleave(c // g)
        return [(y * _per_channel(scale, r) + _per_channel(bias, r)).to(x.dtype)]


@register
class LpNormalization(NormOp):
    op_type = "LpNormalization"

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.axis = self.rng.randint(-rank, rank - 1)
        self.p = self.rng.choice((1, 2))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        attrs = {"axis": self.axis, "p": self.p} if self.explicit or self.axis != -1 or self.p != 2 else {}
        em.node(self.op_type, ins, outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        axis = axis_of(attrs, "axis", -1, x.dim())
        p = int(attrs.get("p", 2))
        xw = widen(x)
        norm = xw.abs().sum(dim=axis, keepdim=True) if p == 1 else torch.sqrt((xw * xw).sum(dim=axis, keepdim=True))
        # An all-zero slice stays zero (onnxruntime and the ONNX evaluator agree), not 0/0.
        return [(xw / torch.where(norm == 0, torch.ones_like(norm), norm)).to(x.dtype)]


@register
class MeanVarianceNormalization(NormOp):
    """(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over the `axes`, as the ONNX function body
    spells it (the variance is not computed from centred values)."""

    op_type = "MeanVarianceNormalization"
    # The schema lists float16 and double too, but its function body adds a float epsilon, so
    # onnx.checker's full check rejects any other type.
    dtypes = (DType.float32,)

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.axes = sorted(self.rng.sample(range(rank), self.rng.randint(1, rank)))

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        # Over one element the variance is 0: the spec's epsilon makes the result 0, while
        # onnxruntime, which drops it, divides 0 by 0. No value can make that stable.
        return [numel([ins[0].shape[a] for a in self.axes]) >= 2]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        # Always written, and kept by generator.emit.ALWAYS_WRITTEN: onnx 1.23's full check
        # expands the function body, whose Constant then has no value when `axes` is left to
        # its default (every opset, a checker bug).
        em.node(self.op_type, ins, outs, axes=self.axes)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        axes = [a + x.dim() if a < 0 else a for a in attrs.get("axes", [0, 2, 3])]
        xw = widen(x)
        mean = xw.mean(dim=axes, keepdim=True)
        std = torch.sqrt((xw * xw).mean(dim=axes, keepdim=True) - mean * mean)
        return [((xw - mean) / (std + 1e-9)).to(x.dtype)]


@register
class LRN(NormOp):
    """Local response normalisation across channels (the reference also takes ONNX's even sizes,
    whose extra channel comes after)."""

    op_type = "LRN"
    min_rank = 4
    max_rank = 4

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.size = self.rng.choice((1, 3, 3, 5, 5, 7))  # onnxruntime refuses even sizes
        self.alpha = self.rng.choice((1e-4, 1e-3, 0.05, 0.5))
        self.beta = self.rng.choice((0.75, 0.75, 0.5, 1.0))
        self.bias = self.rng.choice((1.0, 1.0, 2.0, 0.5))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        attrs: dict[str, Any] = {"size": self.size}
        if self.explicit or (self.alpha, self.beta, self.bias) != (1e-4, 0.75, 1.0):
            attrs.update(alpha=self.alpha, beta=self.beta, bias=self.bias)
        em.node("LRN", ins, outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        size = int(attrs["size"])
        alpha, beta, bias = (float(attrs.get(k, d)) for k, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
        xw = widen(x)
        front = (size - 1) // 2
        squares = F.pad((xw * xw).movedim(1, -1), (front, size - 1 - front))
        window = squares.unfold(-1, size, 1).sum(dim=-1).movedim(-1, 1)
        return [(xw / (bias + alpha / size * window) ** beta).to(x.dtype)]
