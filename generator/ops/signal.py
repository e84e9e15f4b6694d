"""Spectral ops: the Hann, Hamming and Blackman windows, MelWeightMatrix, DFT and STFT.

Each is written in the idiom an exported audio or spectral model uses, reading the graph tensor
it is inserted on: a window of the tensor's last-axis length multiplies it (`x * hann(n)`), a
mel matrix right-multiplies a tensor whose last axis is a one-sided spectrum, and a DFT or STFT
reads the tensor as a real signal (unsqueezed into ONNX's [..., 1] layout, as `torch.fft.rfft`
exports), as the reals of a complex one, or as it stands when it already ends in 1 or 2.

The references compute in float64 (complex128) and round once to the node's type. A DFT sums
its terms in an order each build chooses, so the generated lengths stay at most MAX_LENGTH,
where the float32 results of every build lie well within the oracles' bounds.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

import numpy as np
import torch

from generator.dtypes import FLOATS_32_FIRST, DType
from generator.ops.base import Attrs, Emitter, OpSpec, Reference, SameShapeOp, register
from generator.ops.dynamic import part_name
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, floordiv, numel

MAX_LENGTH = 64
"""The longest DFT (and signal axis) generated: sums of at most 64 terms stay within float32's
tolerance in any order."""
SIZE_TYPES: tuple[type[np.signedinteger], ...] = (np.int64, np.int64, np.int32)
"""The types a size, length or step scalar is written in (T2 of the spectral schemas)."""


def torch_type(elem_type: int) -> torch.dtype:
    """The torch dtype of an ONNX element type (an `output_datatype`)."""
    dtype: torch.dtype = getattr(torch, DType.from_onnx(elem_type).value)
    return dtype


def scalar_of(t: torch.Tensor) -> int:
    return int(t.reshape(()).item())


def scalar_operand(em: Emitter, value: int, runtime: bool, index_type: type[np.signedinteger]) -> str:
    """A 0-d int operand: an initializer, or a graph input holding it."""
    array = np.asarray(value, dtype=index_type)
    return em.runtime(array) if runtime else em.const(array)


# --- windows -------------------------------------------------------------------------------


def cosine_window(coeffs: Sequence[float], attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """A window sum_k coeffs[k] * cos(2 pi k n / N), N the size when periodic and the size less
    one when symmetric, in output_datatype (float by default)."""
    size = scalar_of(inputs[0])
    denominator = size if int(attrs.get("periodic", 1)) else size - 1
    phase = 2 * math.pi * torch.arange(size, dtype=torch.float64) / denominator
    w = torch.zeros_like(phase)
    for k, c in enumerate(coeffs):
        w = w + c * torch.cos(k * phase)
    return [w.to(torch_type(int(attrs.get("output_datatype", 1))))]


class WindowOp(SameShapeOp):
    """`x * window(n)`, n the last axis of x: the size a constant, a graph input, or read off
    x's shape (Shape, then Gather of its last entry), as `torch.hann_window(x.shape[-1])`
    exports; the window is made in x's type (output_datatype, left at its float default at
    times)."""

    since_opset = 17
    dtypes = FLOATS_32_FIRST
    node_cost = 2

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.periodic = self.rng.random() < 0.6
        self.write_periodic = not self.periodic or self.rng.random() < 0.5
        self.size_from = self.rng.choice(("const", "const", "runtime", "shape"))
        self.size_type = self.rng.choice(SIZE_TYPES)
        self.write_type = ins[0].dtype is not DType.float32 or self.rng.random() < 0.5

    @classmethod
    def schema_allows(cls, opset: int, ins: Sequence[TType]) -> bool:
        return ins[0].dtype in cls.dtypes

    @classmethod
    def support_keys(cls, key: DType) -> list[tuple[str, DType]]:
        return [(cls.op_type, key), ("Mul", key)]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        # A symmetric window of one point divides by zero.
        return [ins[0].shape[-1] >= (1 if self.periodic else 2)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        if self.size_from == "shape":
            size = part_name(outs, 1)
            em.node("Shape", [ins[0]], [part_name(outs, 0)])
            em.node("Gather", [part_name(outs, 0), em.const(np.asarray(-1, dtype=np.int64))], [size])
        else:
            size = scalar_operand(em, em.ival(x.shape[-1]), self.size_from == "runtime", self.size_type)
        attrs = {"periodic": int(self.periodic)} if self.write_periodic else {}
        if self.write_type:
            attrs["output_datatype"] = x.dtype.onnx
        em.node(self.op_type, [size], [part_name(outs, 2)], **attrs)
        em.node("Mul", [ins[0], part_name(outs, 2)], outs)


@register
class HannWindow(WindowOp):
    op_type = "HannWindow"

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return cosine_window((0.5, -0.5), attrs, inputs)


@register
class HammingWindow(WindowOp):
    """ONNX's alpha is 25/46 (the value that cancels the first sidelobe), not the rounded 0.54."""

    op_type = "HammingWindow"

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return cosine_window((25 / 46, -21 / 46), attrs, inputs)


@register
class BlackmanWindow(WindowOp):
    op_type = "BlackmanWindow"

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return cosine_window((0.42, -0.5, 0.08), attrs, inputs)


# --- DFT -----------------------------------------------------------------------------------


def as_complex(x: torch.Tensor) -> torch.Tensor:
    """ONNX's [..., 1] real or [..., 2] complex layout as a complex128 tensor without the last dim."""
    xd = x.double()
    return torch.complex(xd[..., 0], xd[..., 1] if x.shape[-1] == 2 else torch.zeros_like(xd[..., 0]))


def as_pairs(y: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A complex tensor in ONNX's [..., 2] layout."""
    return torch.stack([y.real, y.imag], dim=-1).to(dtype)


LAYOUTS = ("unsqueeze", "concat", "unsqueeze", "concat", "direct")
"""How a DFT or STFT reads its tensor x: as the reals of [..., 1] (Unsqueeze), as the reals of
a complex [..., 2] whose imaginary parts are owned weights (Unsqueeze, Concat), or as it is."""


def signal_layout(em: Emitter, layout: str, x: AbsTensor, name: str, outs: Sequence[str]) -> str:
    """Writes the nodes that put x in ONNX's signal layout; returns the signal's name."""
    if layout == "direct":
        return name
    em.node("Unsqueeze", [name, em.const_i64([-1])], [part_name(outs, 0)])
    if layout == "unsqueeze":
        return part_name(outs, 0)
    imaginary = em.weight([*(em.ival(d) for d in x.shape), 1], x.dtype)
    em.node("Concat", [part_name(outs, 0), imaginary], [part_name(outs, 1)], axis=-1)
    return part_name(outs, 1)


def dft(x: torch.Tensor, axis: int, length: int | None, inverse: bool, onesided: bool) -> torch.Tensor:
    """The DFT of ONNX's layout along `axis` (of x, the pair dim included), the signal cut or
    zero-padded to `length`. Inverse one-sided is the IRFFT: a one-sided spectrum in, the real
    signal of `length` (by default 2 * (n - 1)) out, as [..., 1]."""
    axis = axis % x.dim()
    signal = as_complex(x)
    if inverse and onesided:
        n = length if length is not None else 2 * (x.shape[axis] - 1)
        real: torch.Tensor = torch.fft.irfft(signal, n=n, dim=axis)
        return real.unsqueeze(-1).to(x.dtype)
    n = length if length is not None else x.shape[axis]
    y = torch.fft.ifft(signal, n=n, dim=axis) if inverse else torch.fft.fft(signal, n=n, dim=axis)
    if onesided:
        y = y.narrow(axis, 0, n // 2 + 1)
    return as_pairs(y, x.dtype)


def _dft_17(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """DFT-17: the axis is an attribute, 1 by default (the first dim after the batch)."""
    length = inputs[1] if len(inputs) > 1 else None
    n = scalar_of(length) if length is not None else None
    inverse, onesided = bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0))
    return [dft(inputs[0], int(attrs.get("axis", 1)), n, inverse, onesided)]


@register
class DFT(OpSpec):
    """A real or complex signal (`signal_layout`), forward or inverse, two- or one-sided (RFFT
    from real, IRFFT from complex: the only one-sided forms the spec and onnxruntime allow),
    with a dft_length or not, along any signal axis, as DFT-17's attribute or DFT-20's input."""

    op_type = "DFT"
    since_opset = 17
    dtypes = FLOATS_32_FIRST
    old_attrs = frozenset({"axis"})
    node_cost = 3  # with the Unsqueeze and Concat of `signal_layout`

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        layouts = LAYOUTS[: 4 if rank == 1 else 5] if rank < 5 else ("direct",)
        if out is not None:  # backward: the layout that gives the output's rank
            layouts = tuple(a for a in layouts if (a == "direct") == (out.rank == rank)) or layouts
        self.layout = self.rng.choice(layouts)
        self.unsqueeze = self.layout != "direct"
        self.complex = self.layout == "concat" or (self.layout == "direct" and self.rng.random() < 0.6)
        self.inverse = self.rng.random() < 0.4
        self.onesided = self.rng.random() < 0.4 and (self.complex == self.inverse)
        self.irfft = self.inverse and self.onesided
        self.node_rank = rank + 1 if self.unsqueeze else rank
        self.axis = self.rng.randrange(self.node_rank - 1)
        self.negative_axis = self.rng.random() < 0.3
        self.with_length = self.rng.random() < 0.5
        self.length: Dim = sc.var("dft_length", lo=1, hi=MAX_LENGTH) if self.with_length else 0
        self.odd = self.rng.random() < 0.5
        self.runtime_length = self.rng.random() < 0.3
        self.length_type = self.rng.choice(SIZE_TYPES)
        self.explicit = self.rng.random() < 0.5

    @classmethod
    def support_keys(cls, key: DType) -> list[tuple[str, DType]]:
        return [("DFT", key), ("Unsqueeze", key), ("Concat", key)]

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype not in cls.dtypes or out.rank < 2:
            return None
        return [TType(out.dtype, out.rank - 1 if rng.random() < 0.5 else out.rank)]

    def _node_shape(self, ins: list[AbsTensor]) -> list[Dim]:
        return [*ins[0].shape, 1] if self.unsqueeze else list(ins[0].shape)

    def _length(self, ins: list[AbsTensor]) -> Dim:
        n = self._node_shape(ins)[self.axis]
        if self.irfft:
            return 2 * (n - 1) + (1 if self.with_length and self.odd else 0)
        return self.length if self.with_length else n

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        shape = self._node_shape(ins)
        cons: list[Cond] = [shape[self.axis] <= MAX_LENGTH]
        if self.layout == "direct":
            cons.append(shape[-1] == (2 if self.complex else 1))
        if self.with_length and not self.irfft:
            cons += [self.length >= 1, self.length <= MAX_LENGTH]
        if self.irfft:
            # The spectrum holds exactly the length's n // 2 + 1 bins: where it holds more or
            # fewer, builds read the spec's cut-or-pad rule differently (tests/generator/test_ops_signal.py).
            cons += [shape[self.axis] >= 2, self._length(ins) <= MAX_LENGTH]
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape = self._node_shape(ins)
        length = self._length(ins)
        shape[self.axis] = floordiv(length, 2) + 1 if self.onesided and not self.inverse else length
        shape[-1] = 1 if self.irfft else 2
        return [AbsTensor(ins[0].dtype, shape)]

    def work(self, val: Callable[[Dim], int]) -> int:
        out = self.transfer(self.inputs)[0].shape
        return math.prod(val(d) for d in out) * val(self._length(self.inputs))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        operands = [signal_layout(em, self.layout, self.inputs[0], ins[0], outs)]
        if self.with_length:
            length = em.ival(self._length(self.inputs))
            operands.append(scalar_operand(em, length, self.runtime_length, self.length_type))
        axis = self.axis - self.node_rank if self.negative_axis else self.axis
        attrs: dict[str, int] = {}
        if em.opset >= 20:
            if axis != -2 or self.explicit:
                operands += [""] * (2 - len(operands)) + [em.const(np.asarray(axis, dtype=np.int64))]
        elif axis != 1 or self.explicit:
            attrs["axis"] = axis
        for key, flag in (("inverse", self.inverse), ("onesided", self.onesided)):
            if flag or self.explicit:
                attrs[key] = int(flag)
        em.node("DFT", operands, outs, **attrs)

    @classmethod
    def refusal(cls, version: int, attrs: Attrs) -> str | None:
        if version >= 20 and "axis" in attrs:
            return f"DFT-{version} has no axis attribute (its axis is an input)"
        return super().refusal(version, attrs)

    @classmethod
    def reference_at(cls, version: int) -> Reference:
        return _dft_17 if version < 20 else cls.reference

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """DFT-20: the axis is an optional input, -2 (the last signal dim) by default."""
        length = inputs[1] if len(inputs) > 1 else None
        axis = inputs[2] if len(inputs) > 2 else None
        n = scalar_of(length) if length is not None else None
        inverse, onesided = bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0))
        return [dft(inputs[0], scalar_of(axis) if axis is not None else -2, n, inverse, onesided)]


# --- STFT ----------------------------------------------------------------------------------


@register
class STFT(OpSpec):
    """Frames of a [batch, length] signal made real or complex (`signal_layout`), or of a
    [batch, length, 1 | 2] one, each weighted by an owned window or not, the frame length
    written, implied by the window, or left to the signal's length. Complex signals are
    two-sided, the only way the spec defines them. `onesided` is always written (see `emit`)."""

    op_type = "STFT"
    since_opset = 17
    dtypes = FLOATS_32_FIRST
    min_rank = 2
    max_rank = 3
    node_cost = 3

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.layout = self.rng.choice(LAYOUTS[:2]) if ins[0].rank == 2 else "direct"
        self.complex = self.layout == "concat" or (self.layout == "direct" and self.rng.random() < 0.5)
        self.onesided = not self.complex and self.rng.random() < 0.6
        self.window = self.rng.random() < 0.6
        self.write_length = not self.window or self.rng.random() < 0.5
        whole = not self.window and not self.write_length
        self.frame = sc.var("frame_length", lo=1, hi=MAX_LENGTH) if not whole else 0
        self.step = sc.var("frame_step", lo=1, hi=16)
        self.step_type = self.rng.choice(SIZE_TYPES)
        self.runtime = self.rng.random() < 0.3

    @classmethod
    def support_keys(cls, key: DType) -> list[tuple[str, DType]]:
        return [("STFT", key), ("Unsqueeze", key), ("Concat", key)]

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype not in cls.dtypes or out.rank != 4:
            return None
        return [TType(out.dtype, rng.choice((2, 3)))]

    def _frame(self, ins: list[AbsTensor]) -> Dim:
        return self.frame if self.window or self.write_length else ins[0].shape[1]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        frame, length = self._frame(ins), ins[0].shape[1]
        cons: list[Cond] = [frame >= 1, frame <= MAX_LENGTH, frame <= length, self.step >= 1, self.step <= 16]
        if self.layout == "direct":
            cons.append(ins[0].shape[2] == (2 if self.complex else 1))
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        frame = self._frame(ins)
        frames = floordiv(ins[0].shape[1] - frame, self.step) + 1
        bins = floordiv(frame, 2) + 1 if self.onesided else frame
        return [AbsTensor(ins[0].dtype, [ins[0].shape[0], frames, bins, 2])]

    def work(self, val: Callable[[Dim], int]) -> int:
        return val(numel(self.transfer(self.inputs)[0].shape)) * val(self._frame(self.inputs))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        signal = signal_layout(em, self.layout, x, ins[0], outs)
        frame = em.ival(self._frame(self.inputs))
        operands = [signal, scalar_operand(em, em.ival(self.step), self.runtime, self.step_type)]
        operands.append(em.weight([frame], x.dtype) if self.window else "")
        if self.write_length:
            operands.append(scalar_operand(em, frame, self.runtime, self.step_type))
        while operands[-1] == "":
            operands.pop()
        # Always written, and kept by generator.emit.ALWAYS_WRITTEN: onnx's shape inference
        # (1.23) reads an absent onesided as 0, against the schema's default of 1 that
        # onnxruntime and onnx.reference use, so strict inference rejects the implied form's
        # one-sided output shape.
        em.node("STFT", operands, outs, onesided=int(self.onesided))

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        signal, step = inputs[0], scalar_of(inputs[1])
        window = inputs[2] if len(inputs) > 2 else None
        length = inputs[3] if len(inputs) > 3 else None
        frame = signal.shape[1] if window is None else window.shape[0]
        frame = scalar_of(length) if length is not None else frame
        frames = as_complex(signal).unfold(1, frame, step)
        if window is not None:
            frames = frames * window.double()
        y = torch.fft.fft(frames, dim=-1)
        if int(attrs.get("onesided", 1)):
            y = y[..., : frame // 2 + 1]
        return [as_pairs(y, signal.dtype)]


# --- MelWeightMatrix -------------------------------------------------------------------------

SAMPLE_RATES = (8000, 16000, 22050, 44100, 1000)
BIN_MARGIN = 1e-3
"""How far from an integer every band edge's spectrum position, (dft_length + 1) * hz / rate,
is drawn: the floor that makes it a bin is a jump, and builds compute the mel scale in float32
or float64, with log1p or log10."""


def band_edges(bands: int, length: int, rate: int, low: float, high: float, dtype: type = np.float64) -> np.ndarray:
    """The bands + 2 edge positions on the spectrum, before their floor, computed in `dtype`."""
    f = np.dtype(dtype).type
    low_mel, high_mel = (f(2595) * np.log10(f(1) + f(v) / f(700)) for v in (low, high))
    points = low_mel + np.arange(bands + 2).astype(dtype) * ((high_mel - low_mel) / f(bands + 2))
    hz = f(700) * (np.power(f(10), points / f(2595)) - f(1))
    edges: np.ndarray = f(length + 1) * hz / f(rate)
    return edges


def mel_bounds(rng: np.random.Generator, bands: int, length: int) -> tuple[int, float, float]:
    """(sample rate, lower, upper edge hertz): whole hertz below the Nyquist rate, whose band
    edges all lie BIN_MARGIN or more from a bin boundary, in float32 as in float64."""
    for _ in range(200):
        rate = int(rng.choice(SAMPLE_RATES))
        low, high = float(rng.integers(1, rate // 4)), float(rng.integers(rate // 4, rate // 2 + 1))
        edges = band_edges(bands, length, rate, low, high)
        near = np.abs(edges - np.round(edges)).min()
        same = np.array_equal(np.floor(edges), np.floor(band_edges(bands, length, rate, low, high, np.float32)))
        if near >= BIN_MARGIN and same and edges.max() < length // 2 + 1:
            return rate, low, high
    raise ValueError("no mel bounds away from the bin boundaries were drawn")


@register
class MelWeightMatrix(OpSpec):
    """`x @ mel`, x's last axis the dft_length // 2 + 1 bins of a one-sided spectrum (the mel
    spectrogram idiom), the matrix made in x's type; its five scalars are constants or graph
    inputs, drawn so that every band edge is clearly inside one bin (`mel_bounds`)."""

    op_type = "MelWeightMatrix"
    since_opset = 17
    dtypes = FLOATS_32_FIRST
    node_cost = 2

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.bands = sc.var("mel_bins", lo=1, hi=16)
        self.odd = self.rng.random() < 0.5
        self.int_type = self.rng.choice(SIZE_TYPES)
        # Not float16: builds compute the scale in the edges' type or wider, across bin edges.
        self.edge_type = self.rng.choice((DType.float32, DType.float32, DType.float64))
        self.runtime = self.rng.random() < 0.3
        self.write_type = ins[0].dtype is not DType.float32 or self.rng.random() < 0.5

    @classmethod
    def schema_allows(cls, opset: int, ins: Sequence[TType]) -> bool:
        return ins[0].dtype in cls.dtypes

    @classmethod
    def support_keys(cls, key: DType) -> list[tuple[str, DType]]:
        return [("MelWeightMatrix", key), ("MatMul", key)]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        spectrum = ins[0].shape[-1]
        return [spectrum >= 2, 2 * (spectrum - 1) <= MAX_LENGTH, self.bands >= 1, self.bands <= 16]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, [*ins[0].shape[:-1], self.bands])]

    def work(self, val: Callable[[Dim], int]) -> int:
        return val(numel(self.inputs[0].shape)) * val(self.bands)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        length = 2 * (em.ival(x.shape[-1]) - 1) + int(self.odd)
        bands = em.ival(self.bands)
        rate, low, high = mel_bounds(em.values, bands, length)
        operands = [scalar_operand(em, v, self.runtime, self.int_type) for v in (bands, length, rate)]
        for edge in (low, high):
            value = np.asarray(edge, dtype=self.edge_type.numpy)
            operands.append(em.runtime(value) if self.runtime else em.const(value))
        attrs = {"output_datatype": x.dtype.onnx} if self.write_type else {}
        em.node("MelWeightMatrix", operands, [part_name(outs, 0)], **attrs)
        em.node("MatMul", [ins[0], part_name(outs, 0)], outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Band i rises linearly from 0 at edge bin i to 1 at bin i + 1 and falls to 0 at bin
        i + 2 (a band whose first two edges share a bin is 1 there), as onnxruntime builds it."""
        bands, length, rate = (scalar_of(t) for t in inputs[:3])
        low, high = (float(t.reshape(()).item()) for t in inputs[3:5])
        edges = torch.from_numpy(np.floor(band_edges(bands, length, rate, low, high))).long()
        spectrum = length // 2 + 1
        if bool(((edges < 0) | (edges >= spectrum)).any()):
            raise ValueError("a mel band edge outside the spectrum's bins has no defined weight")
        j = torch.arange(spectrum, dtype=torch.float64)[:, None]
        left, center, right = (e.double()[None, :] for e in (edges[:-2], edges[1:-1], edges[2:]))
        rise = torch.where(center > left, (j - left) / (center - left).clamp_min(1), torch.ones_like(j - left))
        fall = (right - j) / (right - center).clamp_min(1)
        w = torch.where((j >= left) & (j <= center), rise, torch.where((j > center) & (j < right), fall, 0.0))
        return [w.to(torch_type(int(attrs.get("output_datatype", 1))))]
