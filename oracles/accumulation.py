"""Float16 and bfloat16 sums accumulated step by step: one more edge of the precision envelope.

ONNX does not say in which type a float16 (or bfloat16) sum accumulates. The torch reference sums in
float32 and rounds once; a backend may as well round every partial sum to float16, and
then its error grows with the number of terms and the size of the partial sums, not with
the result. On TVM 0.26 a float16 CumSum equal, element for element, to that step-by-step
sum was reported as wrong, 1.6 ulp away from torch's. This reading computes each float16
CumSum and sum-like reduction that way (every other node as the reference does), and an
output between it and the reference is within bounds (oracles.case).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import onnx
import torch

from backends.reference import ReferenceError, Substitute, run_reference
from generator import onnx_checks
from generator.ops.base import Attrs
from generator.ops.reduce import ReduceOp

Terms = Callable[[torch.Tensor], torch.Tensor]
"""What a reduction adds up, from its input: the values, their squares, their magnitudes."""


def _running(terms: torch.Tensor) -> torch.Tensor:
    """Partial sums along the last axis, each rounded to the terms' type (float16)."""
    acc = torch.zeros(terms.shape[:-1], dtype=terms.dtype)
    out = torch.empty_like(terms)
    for i in range(terms.shape[-1]):
        acc = acc + terms[..., i]
        out[..., i] = acc
    return out


def _stepwise_sum(terms_of: Terms, finish: Callable[[torch.Tensor, int], torch.Tensor]) -> Substitute:
    """A sum-like reduction with every partial sum rounded to float16; `finish` turns the
    sum of n terms into the op's result (a mean divides, an L2 norm takes the root)."""

    def reducer(x: torch.Tensor, axes: list[int], keep: bool) -> torch.Tensor:
        n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
        rest = [d for d in range(x.dim()) if d not in axes]
        flat = terms_of(x).permute(*rest, *axes).reshape(*[x.shape[d] for d in rest], n)
        total = finish(_running(flat)[..., -1] if n else torch.zeros(flat.shape[:-1], dtype=x.dtype), n)
        if keep:
            for a in axes:
                total = total.unsqueeze(a)
        return total

    def run(attrs: Attrs, args: list[torch.Tensor | None]) -> list[torch.Tensor]:
        return ReduceOp.reduce_with(reducer, attrs, [a for a in args if a is not None])

    return run


def _cumsum(attrs: Attrs, args: list[torch.Tensor | None]) -> list[torch.Tensor]:
    x, axis_t = args[0], args[1]
    assert x is not None and axis_t is not None
    axis = int(axis_t.reshape(-1)[0]) % x.dim()
    y = torch.movedim(x.flip(axis) if attrs.get("reverse", 0) else x, axis, -1)
    total = _running(y)
    if attrs.get("exclusive", 0):
        total = torch.cat([torch.zeros_like(total[..., :1]), total[..., :-1]], dim=-1)
    total = torch.movedim(total, -1, axis)
    return [total.flip(axis) if attrs.get("reverse", 0) else total]


def _same(s: torch.Tensor, n: int) -> torch.Tensor:
    return s


STEPWISE: dict[str, Substitute] = {
    "CumSum": _cumsum,
    "ReduceSum": _stepwise_sum(lambda x: x, _same),
    "ReduceMean": _stepwise_sum(lambda x: x, lambda s, n: s / n if n else s),
    "ReduceSumSquare": _stepwise_sum(lambda x: x * x, _same),
    "ReduceL1": _stepwise_sum(torch.abs, _same),
    "ReduceL2": _stepwise_sum(lambda x: x * x, lambda s, n: torch.sqrt(s)),
    "ReduceLogSum": _stepwise_sum(lambda x: x, lambda s, n: torch.log(s)),
}
"""The 16-bit float accumulations a backend may round step by step, computed so. TVM 0.27
sums a bfloat16 ReduceLogSum so, 0.22 away from the sum rounded once over 60 terms."""


def float16_accumulations(model: onnx.ModelProto) -> dict[int, Substitute]:
    """Node index -> its step-by-step computation, for each accumulation over float16."""
    float16 = _float16_tensors(model)
    return {
        i: STEPWISE[n.op_type]
        for i, n in enumerate(model.graph.node)
        if n.op_type in STEPWISE and n.domain in ("", "ai.onnx") and n.input and n.input[0] in float16
    }


def _float16_tensors(model: onnx.ModelProto) -> set[str]:
    try:
        inferred = onnx_checks.infer_shapes(model, strict_mode=False)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
        inferred = model
    g = inferred.graph
    typed = [*g.input, *g.value_info, *g.output]
    names = {v.name for v in typed if v.type.tensor_type.elem_type in HALF_TYPES}
    return names | {t.name for t in g.initializer if t.data_type in HALF_TYPES}


HALF_TYPES = frozenset({onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16})


def stepwise_reading(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """The outputs with every float16 accumulation rounded step by step; None when the model
    has none, or the reference cannot compute it."""
    substitute = float16_accumulations(model)
    if not substitute:
        return None
    try:
        return run_reference(model, inputs, substitute=substitute)
    except ReferenceError:
        return None
