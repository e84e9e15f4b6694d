"""Graph passes, run in order at O1 on the ONNX graph before the kernels are bound. Each
takes the graph and returns how many times it rewrote something."""

from __future__ import annotations

from collections.abc import Callable

import onnx

from .identity import drop_identity

Pass = Callable[[onnx.GraphProto], int]

PASSES: tuple[Pass, ...] = (drop_identity,)
