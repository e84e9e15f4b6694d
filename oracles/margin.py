"""Numerical-instability check for the oracles: is a difference explainable by rounding?

A wrong result on a case where some unsafe op's operand lies within δ of its invalid
domain (a divisor near zero, an Asin operand near 1, an Exp input near overflow) is
numerically unstable, not a bug: backends may legitimately round differently there.

This module is why oracles/ imports generator/: the unsafe-op table and its margins live
with the value search (generator.values), which must produce cases outside these margins;
the oracles reuse the very same table so that the two can never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx

from generator.values import MarginHit, UnsupportedModel, margin_hits

__all__ = ["MarginHit", "UnsupportedModel", "is_unstable", "unstable_ops"]


def unstable_ops(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> list[MarginHit]:
    """Every op whose operand lies within δ of its invalid domain, or whose output is not
    finite, under these inputs (the reference semantics decide the operand values).

    Raises `UnsupportedModel` for a model with an op the reference cannot run.
    """
    return margin_hits(model, inputs)


def is_unstable(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> bool:
    """True when a difference between backends on this case says nothing about a bug."""
    return bool(unstable_ops(model, inputs))
