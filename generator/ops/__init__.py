"""Operator families; importing this package fills the operator registry."""

from generator.ops import elementwise, indexing, nn, norm, quant, reduce, shape
from generator.ops.base import OpSpec, registry

__all__ = ["OpSpec", "elementwise", "indexing", "nn", "norm", "quant", "reduce", "registry", "shape"]
