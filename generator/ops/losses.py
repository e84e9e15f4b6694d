"""Classification losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Both are ONNX function ops (a runtime that lacks a kernel expands their body), and they reach
deployed graphs from training exports and from evaluation graphs that report a loss. The
scores are the graph tensor the node is inserted on, [N, C] or [N, C, d1, ...]; the targets
are op-owned integers (an initializer, or a graph input holding them) drawn at emission in
[0, C), with some set to `ignore_index` when the node has one, and never all ignored: a mean
over no target divides by zero. An owned class weight is drawn positive, so a mean's divisor
is never near zero either.

The references compute in float64 and round once to the scores' type.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import torch

from generator.dtypes import FLOATS_32_FIRST
from generator.ops.base import OUTPUTS, Attrs, Emitter, OpSpec, register
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType

REDUCTIONS = ("none", "sum", "mean", "mean")
IGNORED_SHARE = 0.25
"""About this share of the targets is set to ignore_index, where the node has one."""
TARGET_TYPES: tuple[type[np.signedinteger], ...] = (np.int64, np.int64, np.int32)


def nll(log_prob: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None, attrs: Attrs) -> torch.Tensor:
    """ONNX's loss over [N, C, d...] log-probabilities, in float64: loss[n, d...] =
    -log_prob[n, target, d...] * weight[target], 0 where the target is ignore_index; summed,
    or divided by the sum of the weights it took (the count of kept targets without weights)."""
    t = target.long()
    ignore = attrs.get("ignore_index")
    kept = t != int(ignore) if ignore is not None else torch.ones_like(t, dtype=torch.bool)
    safe = torch.where(kept, t, torch.zeros_like(t))
    classes = log_prob.shape[1]
    if bool(((safe < 0) | (safe >= classes)).any()):
        raise IndexError("a target outside [0, C) that is not ignore_index has no ONNX loss")
    picked = -log_prob.double().gather(1, safe.unsqueeze(1)).squeeze(1)
    w = weight.double()[safe] if weight is not None else torch.ones_like(picked)
    w = torch.where(kept, w, torch.zeros_like(w))
    loss = picked * w
    reduction = attrs.get("reduction", "mean")
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / w.sum()


def _optional(inputs: list[torch.Tensor], slot: int) -> torch.Tensor | None:
    return inputs[slot] if len(inputs) > slot else None


class LossOp(OpSpec):
    """What the two losses share: the scores, owned targets and weights, the reduction and
    ignore_index, drawn as the node is made."""

    dtypes = FLOATS_32_FIRST
    min_rank = 2
    max_rank = 4

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        if out is not None:
            self.reduction = "none" if out.rank > 0 else self.rng.choice(("sum", "mean"))
        else:
            self.reduction = self.rng.choice(REDUCTIONS)
        self.write_reduction = self.reduction != "mean" or self.rng.random() < 0.5
        self.weighted = self.rng.random() < 0.5
        self.ignore = self.rng.choice((None, "negative", "negative", "class"))
        self.ignore_index = self.rng.choice((-1, -1, -1, -100))
        """The negative ignore_index; an ignored class is drawn at emission, below C."""
        self.target_type = self.rng.choice(TARGET_TYPES)
        self.runtime_target = self.rng.random() < 0.3

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype not in cls.dtypes or out.rank > cls.max_rank - 1:
            return None
        return [TType(out.dtype, out.rank + 1 if out.rank > 0 else rng.randint(2, cls.max_rank))]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        # An ignored class leaves another to keep.
        return [ins[0].shape[1] >= (2 if self.ignore == "class" else 1)]

    def loss_shape(self, ins: list[AbsTensor]) -> list[Dim]:
        s = ins[0].shape
        return [s[0], *s[2:]] if self.reduction == "none" else []

    def operands(self, em: Emitter, ins: list[str]) -> tuple[list[str], dict[str, object]]:
        """The scores, targets and (maybe) weights, and the attributes."""
        x = self.inputs[0]
        shape = [em.ival(d) for d in x.shape]
        classes = shape[1]
        ignore = int(em.values.integers(classes)) if self.ignore == "class" else self.ignore_index
        target = em.values.integers(0, classes, size=[shape[0], *shape[2:]])
        if self.ignore is not None:
            target = np.where(em.values.random(target.shape) < IGNORED_SHARE, ignore, target)
            # Some target kept and, where there are two or more, some ignored.
            if target.size > 1 and not bool((target == ignore).any()):
                target.flat[-1] = ignore
            if bool((target == ignore).all()):
                target.flat[0] = (ignore + 1) % classes if self.ignore == "class" else 0
        array = target.astype(self.target_type)
        operands = [ins[0], em.runtime(array) if self.runtime_target else em.const(array)]
        if self.weighted:
            weight = em.values.uniform(0.25, 1.25, size=classes)
            operands.append(em.const(weight.astype(x.dtype.numpy)))
        attrs: dict[str, object] = {"reduction": self.reduction} if self.write_reduction else {}
        if self.ignore is not None:
            attrs["ignore_index"] = ignore
        return operands, attrs


@register
class NegativeLogLikelihoodLoss(LossOp):
    """The scores stand for log-probabilities (any float is a valid input)."""

    op_type = "NegativeLogLikelihoodLoss"
    since_opset = 12

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, self.loss_shape(ins))]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        operands, attrs = self.operands(em, ins)
        em.node(self.op_type, operands, outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        return [nll(x, inputs[1], _optional(inputs, 2), attrs).to(x.dtype)]


@register
class SoftmaxCrossEntropyLoss(LossOp):
    """The loss of log_softmax over the class axis; the log-probabilities are a second output
    at times (only in forward insertion, which places nodes of several outputs)."""

    op_type = "SoftmaxCrossEntropyLoss"
    since_opset = 12

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.log_prob = out is None and self.rng.random() < 0.4

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        loss = AbsTensor(ins[0].dtype, self.loss_shape(ins))
        return [loss, AbsTensor(ins[0].dtype, list(ins[0].shape))] if self.log_prob else [loss]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        operands, attrs = self.operands(em, ins)
        em.node(self.op_type, operands, outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        log_prob = torch.log_softmax(x.double(), dim=1)
        loss = nll(log_prob, inputs[1], _optional(inputs, 2), attrs).to(x.dtype)
        return [loss, log_prob.to(x.dtype)] if int(attrs.get(OUTPUTS, 1)) > 1 else [loss]
