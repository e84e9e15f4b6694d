"""Inputs on which ONNX leaves the result unspecified.

Integer division or modulo by zero, integer overflow in arithmetic and reductions, a
float cast out of an integer type's range, and a shift past the type's width have no
right answer: the torch reference wraps where a backend may saturate, trap or return
anything. So a value difference on such a case is never a bug. A process that dies on
one is, though: compilers fix crashes on garbage inputs, and a crash that appears
between two builds is a regression of robustness (oracles.sides).

The unsafe-op table (generator.values.unsafe) marks which of its predicates are about
undefined results; they are checked here on the reference semantics, op by op, so a
case whose torch reference raised (torch refuses integer division by zero) is still
told apart.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import numpy as np
import onnx
import torch

from generator.values import UnsupportedModel
from generator.values.interp import Program


def undefined_inputs(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> list[str]:
    """Why the case's result is unspecified, one line per op (empty: it is well defined)."""
    try:
        program = Program(model, inputs, free=())
    except UnsupportedModel:
        return []
    reasons: list[str] = []
    # A case the reference semantics cannot evaluate (an axis input out of range) tells
    # nothing more past that point: what was found before it stands.
    with torch.no_grad(), contextlib.suppress(RuntimeError, IndexError, ValueError):
        for failure in program.walk(program.env({}), every=True):
            p = failure.predicate
            if p is None or not p.undefined or failure.f is None:
                continue
            violated = p.violated(failure.f)
            if bool(violated.any()):
                count = int(violated.sum())
                reasons.append(f"{failure.node.label}: not '{p.name}' in {count} element(s)")
    return reasons
