"""The margin check: which unsafe ops of a model run with operands near their invalid domain.

Where an operand lies within δ of an op's invalid domain, a few ulps of legitimate
rounding difference between two backends can move the result by more than any tolerance
(or to NaN on one side only). A difference found on such a case is numerically unstable,
not a bug, so the oracles ask this before blaming a backend.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
import torch
from pydantic import BaseModel, ConfigDict

from generator.values.interp import Failure, Program


class MarginHit(BaseModel):
    """One op whose operand lies within δ of its invalid domain (or outside it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node: str
    op_type: str
    predicate: str
    """The violated or nearly violated inequality; `non-finite output` for an overflow,
    or the reference's error message."""
    elements: int = 0
    """Operand elements within δ of the invalid domain (or outside it)."""
    outside: int = 0
    """Of those, elements outside the valid domain itself."""
    margin: float = 0.0


def margin_hits(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> list[MarginHit]:
    """Every unsafe op of the model under these inputs (initializers read from the model).

    Raises `UnsupportedModel` when the model has an op the reference cannot run.
    """
    program = Program(model, inputs, free=())
    with torch.no_grad():
        return [_hit(f) for f in program.walk(program.env({}), every=True)]


def _hit(f: Failure) -> MarginHit:
    node = f.node.name or f"#{f.node.index}"
    if f.predicate is None or f.f is None:
        return MarginHit(node=node, op_type=f.node.op_type, predicate=f.error or "non-finite output")
    near = int(f.predicate.within(f.f, f.margin, f.exact).sum())
    outside = int(f.predicate.violated(f.f).sum())
    return MarginHit(
        node=node, op_type=f.node.op_type, predicate=f.predicate.name, elements=near, outside=outside, margin=f.margin
    )
