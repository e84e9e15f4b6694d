"""numpy kernels, one per supported op; anything else is a declared limitation."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Kernel = Callable[..., np.ndarray]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)), dtype=x.dtype)


def fused_mul_add(a: np.ndarray, b: np.ndarray, c: np.ndarray, sign: float = 1.0) -> np.ndarray:
    """a * b + c for sign 1 (Mul then Add), a * b - c for sign -1 (Mul then Sub)."""
    return np.asarray(a * b + c if sign > 0 else a * b - c)


KERNELS: dict[str, Kernel] = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": np.divide,
    "Neg": np.negative,
    "Relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),
    "Sigmoid": _sigmoid,
    "Tanh": np.tanh,
    "MatMul": np.matmul,
    "Identity": lambda x: x,
}


def kernel(op: str) -> Kernel:
    if op not in KERNELS:
        raise NotImplementedError(f"toycc: op {op} not supported")
    return KERNELS[op]
