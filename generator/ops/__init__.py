"""Operator families; importing this package fills the operator registry."""

from generator.ops import elementwise, nn, reduce, shape
from generator.ops.base import OpSpec, registry

__all__ = ["OpSpec", "elementwise", "nn", "reduce", "registry", "shape"]
