"""How far rounding alone can move a case's outputs: the bound an ill-conditioned case is
judged with.

A chain of Tans near a pole, or a Pow of a large base, amplifies the last bit of every
intermediate: a backend that rounds each node's operands as the model's dtype allows can
land far from the reference and still be right. The float64 re-run knows the true value,
but not how far a correct float32 computation may stray from it. So the case is re-run in
float64 with every float operand of every node moved by one rounding of the dtype it has
in the model (a random sign per element, a few seeded trials), and the largest move of
each output is the spread a correct backend may show; where a trial leaves the op's domain
(a NaN from a log of a sum that cancels), the spread is infinite. Three false wrong
results in one campaign were Tan chains of this kind, one element off by a few thousandths.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import onnx
import torch

from backends.reference import ReferenceError, Substitute, model_opset, run_reference
from generator.ops import registry
from generator.ops.base import Attrs, op_version
from oracles.provenance import tensor_dtypes
from oracles.references import as_float64

TRIALS = 4
"""Seeded re-runs with operands moved by one rounding; the spread is the largest move seen."""
SPREAD_FACTOR = 16.0
"""How many spreads a backend may be off: random signs seldom line every rounding up the
worst way, a kernel's own approximation is off by several roundings (onnxruntime's Tanh
before three Tans: 13.9 spreads), and a long sum rounds at every step, which moving its
operands once does not show (a float32 ReduceLogSum of 2,760 values that nearly cancel:
13.4 spreads). The real bugs of the same campaign were 270 to 10^8 spreads off."""
UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24, "float64": 2.0**-53}


def rounding_spread(
    model: onnx.ModelProto, inputs: Mapping[str, np.ndarray], truth: Mapping[str, np.ndarray] | None = None
) -> dict[str, np.ndarray] | None:
    """Per output, the largest distance from the float64 result (`truth`, the float64
    re-run's, computed here when not given) that moving every float operand by one rounding
    of its model dtype gives; None when the re-run cannot compute."""
    wide_model = as_float64(model)
    wide_inputs = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in inputs.items()}
    try:
        truth = truth if truth is not None else run_reference(wide_model, wide_inputs)
        dtypes = tensor_dtypes(model)
        trials = [
            run_reference(wide_model, wide_inputs, substitute=_jittered(wide_model, dtypes, seed))
            for seed in range(TRIALS)
        ]
    except ReferenceError:
        return None
    spread: dict[str, np.ndarray] = {}
    for name, exact in truth.items():
        if exact.dtype.kind != "f":
            continue
        # Where one rounding takes the result out of the op's domain (a log of a sum that
        # cancels to about 0 turns NaN), the case is too sensitive to judge: infinite spread.
        moves = [
            np.where(np.isfinite(exact) & ~np.isfinite(t[name]), np.inf, np.abs(t[name].astype(np.float64) - exact))
            for t in trials
            if t[name].shape == exact.shape
        ]
        largest = np.max(moves, axis=0) if moves else np.zeros_like(exact)
        spread[name] = np.where(np.isnan(largest), 0.0, largest)
    return spread


def _jittered(wide: onnx.ModelProto, dtypes: Mapping[str, str], seed: int) -> dict[int, Substitute]:
    """Each node of the float64 graph computed on operands moved by one rounding of the
    dtype they have in the model (`dtypes`; the casts the widening adds have none)."""
    specs, opset = registry(), model_opset(wide)
    generator = torch.Generator().manual_seed(seed)
    out: dict[int, Substitute] = {}
    for index, node in enumerate(wide.graph.node):
        spec = specs.get(node.op_type)
        if spec is None or node.domain not in ("", "ai.onnx"):
            continue
        try:
            compute = spec.reference_at(op_version(node.op_type, opset))
        except onnx.defs.SchemaError:
            continue
        units = [UNIT_ROUNDOFF.get(dtypes.get(name, ""), 0.0) for name in node.input]
        out[index] = _moved(compute, units, generator)
    return out


def _moved(
    compute: Callable[[Attrs, list[torch.Tensor]], list[torch.Tensor]], units: list[float], generator: torch.Generator
) -> Substitute:
    def run(attrs: Attrs, args: list[torch.Tensor | None]) -> list[torch.Tensor]:
        moved = [
            _move(a, u, generator) if a is not None and u and a.dtype == torch.float64 else a
            for a, u in zip(args, units, strict=False)
        ]
        return compute(attrs, moved)  # type: ignore[arg-type]

    return run


def _move(a: torch.Tensor, unit: float, generator: torch.Generator) -> torch.Tensor:
    """`a` moved by one rounding, up or down at random, except where it is a whole number
    (an exponent of 2, a bound of 0): those are exact in any arithmetic, and moving a Pow's
    exponent off 2 would turn a negative base's square into NaN."""
    sign = torch.randint(0, 2, a.shape, generator=generator, dtype=a.dtype) * 2 - 1
    return torch.where(a == torch.round(a), a, a * (1 + unit * sign))
