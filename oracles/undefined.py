"""Inputs on which ONNX leaves the result unspecified: the oracles' view of
generator.values.undefined, where the check lives beside the unsafe-op table it reads
(the generator's edge cases use it too, to know an edge it set is one)."""

from __future__ import annotations

from generator.values.undefined import undefined_inputs

__all__ = ["undefined_inputs"]
