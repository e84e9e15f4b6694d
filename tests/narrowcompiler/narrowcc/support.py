"""The op types narrowcc accepts, each at the dtypes of its first input it has kernels for."""

from __future__ import annotations

FLOATS = ("float32",)
SHAPES = ("float32", "int64")
ANY = ("float32", "int64", "bool")

SUPPORTED: dict[str, tuple[str, ...]] = {
    "Abs": FLOATS,
    "Add": SHAPES,
    "Cast": ANY,
    "Clip": FLOATS,
    "Concat": ANY,
    "Conv": FLOATS,
    "Div": FLOATS,
    "Exp": FLOATS,
    "Flatten": SHAPES,
    "Gemm": FLOATS,
    "Greater": SHAPES,
    "Identity": ANY,
    "LeakyRelu": FLOATS,
    "MatMul": FLOATS,
    "MaxPool": FLOATS,
    "Mul": SHAPES,
    "Neg": FLOATS,
    "ReduceMean": FLOATS,
    "ReduceSum": SHAPES,
    "Relu": FLOATS,
    "Reshape": ANY,
    "Sigmoid": FLOATS,
    "Softmax": FLOATS,
    "Squeeze": ANY,
    "Sub": SHAPES,
    "Tanh": FLOATS,
    "Transpose": ANY,
    "Unsqueeze": ANY,
    "Where": ("bool",),
}
