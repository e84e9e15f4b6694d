"""Operator families; importing this package fills the operator registry."""

from generator.ops import (
    clip_cast,
    conv,
    elementwise,
    indexing,
    joining,
    nn,
    norm,
    padding,
    pool,
    quant,
    recurrent,
    reduce,
    resize,
    selection,
    shape,
    unary,
    windows,
)
from generator.ops.base import OpSpec, registry

__all__ = [
    "OpSpec",
    "clip_cast",
    "conv",
    "elementwise",
    "indexing",
    "joining",
    "nn",
    "norm",
    "padding",
    "pool",
    "quant",
    "recurrent",
    "reduce",
    "registry",
    "resize",
    "selection",
    "shape",
    "unary",
    "windows",
]
