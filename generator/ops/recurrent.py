"""Recurrent layers: RNN, GRU and LSTM, in every form their ONNX schema allows.

One node runs a whole sequence, so each form is a different program for a compiler to get
right: a direction (forward, reverse, or both with their outputs stacked), optional inputs
left out (zeros by the spec) or given, outputs left out, batch-first `layout` (opset 14 on),
per-batch `sequence_lens` (past its length a batch's Y is zero and its state stops moving),
any of the spec's activation functions with their alpha and beta, a `clip` on every
activation's input, GRU's `linear_before_reset` and LSTM's coupled `input_forget`.

Weights, biases, peepholes and initial states are owned by the op and emitted as
initializers; sequence lengths are a shape-like operand (a constant, or a graph input of
fixed value that a compiler cannot fold). Long sequences through unbounded activations
(Relu, Affine) grow geometrically, so those forms keep to short sequences and to
|alpha| <= 1, and the witness refuses any value that still overflows.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from generator.dtypes import FLOATS_32_FIRST
from generator.ops.base import Attrs, Emitter, OpSpec, register
from generator.ops.nn import widen
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType

Activation = Callable[[torch.Tensor, float, float], torch.Tensor]

ACTIVATIONS: dict[str, Activation] = {
    "Relu": lambda x, a, b: torch.relu(x),
    "Tanh": lambda x, a, b: torch.tanh(x),
    "Sigmoid": lambda x, a, b: torch.sigmoid(x),
    "Affine": lambda x, a, b: a * x + b,
    "LeakyRelu": lambda x, a, b: torch.where(x >= 0, x, a * x),
    "ThresholdedRelu": lambda x, a, b: torch.where(x >= a, x, torch.zeros_like(x)),
    "ScaledTanh": lambda x, a, b: a * torch.tanh(b * x),
    "HardSigmoid": lambda x, a, b: torch.clamp(a * x + b, 0.0, 1.0),
    "Elu": lambda x, a, b: torch.where(x >= 0, x, a * torch.expm1(torch.clamp(x, max=0.0))),
    "Softsign": lambda x, a, b: x / (1 + x.abs()),
    "Softplus": lambda x, a, b: F.softplus(x),
}
"""The activation functions the schema lists (Relu, Tanh, Sigmoid, and the optional ones),
spelled as the schema spells them, with the formulas its doc gives."""

PARAMS: dict[str, tuple[float | None, float | None]] = {
    "Affine": (None, None),
    "LeakyRelu": (0.01, 0.0),
    "ThresholdedRelu": (1.0, 0.0),
    "ScaledTanh": (None, None),
    "HardSigmoid": (0.2, 0.5),
    "Elu": (1.0, 0.0),
}
"""The functions that read alpha (and beta): the default each takes when the lists run out,
"the same as of corresponding ONNX operators". Affine and ScaledTanh have no such operator,
so no default: a node that leaves theirs out is refused, and none is generated. A function
absent here reads neither; one that reads no beta has 0.0 for it."""
_USES_BETA = frozenset({"Affine", "ScaledTanh", "HardSigmoid"})

UNBOUNDED = frozenset({"Relu", "Affine", "LeakyRelu", "ThresholdedRelu", "Elu", "Softplus", "ScaledTanh"})
"""Functions whose output can exceed 1 in magnitude: a recurrence through them may grow
with every step. ScaledTanh only by its alpha, which the generator keeps at or below 1,
but it stays here so that its sequences stay short too."""
SEQ_CAP = 64
"""The longest sequence a form with only saturating activations gets."""
UNBOUNDED_SEQ_CAP = 8
"""The longest through an unbounded function: gains near 1.2 per step stay below 5x."""

_DRAWN_PARAMS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "Affine": ((0.5, 0.8, -0.6, 1.0), (0.0, 0.1, -0.25)),
    "LeakyRelu": ((0.01, 0.1, 0.5, -0.2), ()),
    "ThresholdedRelu": ((0.1, 0.5, -0.3, 1.0), ()),
    "ScaledTanh": ((1.0, 0.7, -0.5), (1.0, 0.5, 2.0)),
    "HardSigmoid": ((0.2, 0.5, 1.0), (0.5, 0.3, 0.6)),
    "Elu": ((1.0, 0.5, 0.2), ()),
}
"""The values the generator writes: float32-exact decimals, |alpha| <= 1 where the function
is unbounded."""


@dataclass(frozen=True)
class Functions:
    """The activation functions of one direction, with the alpha and beta each reads, and
    the clip that bounds the input of every one of them (h's in LSTM too: the schema
    applies it "to the input of activations", and h is one of the activations it lists)."""

    names: tuple[str, ...]
    alphas: tuple[float, ...]
    betas: tuple[float, ...]
    clip: float | None = None

    def __call__(self, k: int, x: torch.Tensor) -> torch.Tensor:
        if self.clip is not None:
            x = torch.clamp(x, -self.clip, self.clip)
        return ACTIVATIONS[self.names[k]](x, self.alphas[k], self.betas[k])


def read_functions(attrs: Attrs, defaults: tuple[str, ...], directions: int) -> list[Functions]:
    """Each direction's functions. The alpha and beta lists are "consumed in the order of
    activation functions": each function that reads one takes the next value left, and one
    that finds the list used up takes its operator's default (onnxruntime reads it so too;
    a reading by position would need placeholder values for the functions that read none)."""
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in attrs.get("activations", defaults * directions)]
    if len(names) != len(defaults) * directions:
        raise ValueError(f"{len(names)} activations, where {len(defaults) * directions} are needed")
    alphas, betas = list(attrs.get("activation_alpha", [])), list(attrs.get("activation_beta", []))
    clip = float(attrs["clip"]) if "clip" in attrs else None
    per: list[tuple[str, float, float]] = []
    for name in names:
        if name not in ACTIVATIONS:
            raise ValueError(f"activation {name!r} is not one the schema lists")
        alpha_default, beta_default = PARAMS.get(name, (0.0, 0.0))
        alpha = alphas.pop(0) if name in PARAMS and alphas else alpha_default
        beta = betas.pop(0) if name in _USES_BETA and betas else beta_default
        if alpha is None or beta is None:
            raise ValueError(f"activation {name} has no default alpha or beta and the node gives none")
        per.append((name, float(alpha), float(beta)))
    k = len(defaults)
    out = []
    for d in range(directions):
        mine = per[d * k : (d + 1) * k]
        out.append(
            Functions(tuple(n for n, _, _ in mine), tuple(a for _, a, _ in mine), tuple(b for *_, b in mine), clip)
        )
    return out


@dataclass(frozen=True)
class Weights:
    """One direction's parameters, as the cells read them, with the op's switches."""

    w: torch.Tensor
    r: torch.Tensor
    wb: torch.Tensor
    rb: torch.Tensor
    peep: torch.Tensor | None = None
    linear_before_reset: bool = False
    input_forget: bool = False


Cell = Callable[[torch.Tensor, list[torch.Tensor], Weights, Functions], list[torch.Tensor]]
"""One time step of one direction: input [batch, input_size], states (hidden first), the
direction's weights and functions -> the new states."""


def rnn_cell(x: torch.Tensor, s: list[torch.Tensor], p: Weights, fn: Functions) -> list[torch.Tensor]:
    return [fn(0, x @ p.w.T + s[0] @ p.r.T + p.wb + p.rb)]


def gru_cell(x: torch.Tensor, s: list[torch.Tensor], p: Weights, fn: Functions) -> list[torch.Tensor]:
    """Gates in the schema's order z, r, h; linear_before_reset moves the reset gate from
    the state before R's product to the product and its bias."""
    h = s[0]
    n = h.shape[-1]
    gx = x @ p.w.T + p.wb
    gh = h @ p.r[: 2 * n].T + p.rb[: 2 * n]
    z = fn(0, gx[:, :n] + gh[:, :n])
    r = fn(0, gx[:, n : 2 * n] + gh[:, n:])
    rh, rbh = p.r[2 * n :], p.rb[2 * n :]
    reset = r * (h @ rh.T + rbh) if p.linear_before_reset else (r * h) @ rh.T + rbh
    return [(1 - z) * fn(1, gx[:, 2 * n :] + reset) + z * h]


def lstm_cell(x: torch.Tensor, s: list[torch.Tensor], p: Weights, fn: Functions) -> list[torch.Tensor]:
    """Gates in the schema's order i, o, f, c; peepholes i, o, f (o's reads the new cell).
    A coupled forget gate (`input_forget`) is 1 - i."""
    h, c = s
    n = h.shape[-1]
    gates = x @ p.w.T + h @ p.r.T + p.wb + p.rb
    peep = p.peep if p.peep is not None else torch.zeros(3 * n, dtype=x.dtype)
    i = fn(0, gates[:, :n] + peep[:n] * c)
    f = 1 - i if p.input_forget else fn(0, gates[:, 2 * n : 3 * n] + peep[2 * n :] * c)
    c_new = f * c + i * fn(1, gates[:, 3 * n :])
    o = fn(0, gates[:, n : 2 * n] + peep[n : 2 * n] * c_new)
    return [o * fn(2, c_new), c_new]


def _direction(
    cell: Cell, xs: torch.Tensor, states: list[torch.Tensor], p: Weights, fn: Functions, lens: torch.Tensor, back: bool
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Y [seq, batch, hidden] and the final states of one direction. A batch past its length
    keeps its state and writes zeros; reversed, each batch runs from its own last step back
    to 0, which is the same as skipping the steps past its length on the way down."""
    ys: list[torch.Tensor] = [torch.zeros(0)] * xs.shape[0]
    for t in range(xs.shape[0] - 1, -1, -1) if back else range(xs.shape[0]):
        live = (lens > t).reshape(-1, 1)
        new = cell(xs[t], states, p, fn)
        states = [torch.where(live, a, b) for a, b in zip(new, states, strict=True)]
        ys[t] = torch.where(live, new[0], torch.zeros_like(new[0]))
    return torch.stack(ys), states


def _weights(attrs: Attrs, inputs: list[torch.Tensor | None], gates: int, d: int) -> Weights:
    """Direction `d`'s weights; an absent B (or P) is zeros."""
    w, r = widen(_given(inputs[1])), widen(_given(inputs[2]))
    rows = gates * r.shape[-1]
    b = widen(inputs[3])[d] if len(inputs) > 3 and inputs[3] is not None else torch.zeros(2 * rows, dtype=w.dtype)
    peep = inputs[7] if gates == 4 and len(inputs) > 7 else None
    switches = {k: bool(attrs.get(k, 0)) for k in ("linear_before_reset", "input_forget")}
    return Weights(w[d], r[d], b[:rows], b[rows:], None if peep is None else widen(peep)[d], **switches)


def _given(t: torch.Tensor | None) -> torch.Tensor:
    if t is None:
        raise ValueError("a required input is missing")
    return t


def recurrence(
    attrs: Attrs, inputs: list[torch.Tensor | None], cell: Cell, defaults: tuple[str, ...], gates: int
) -> list[torch.Tensor]:
    """Y, Y_h (and Y_c for LSTM) of an RNN, GRU or LSTM node, at every layout and direction."""
    x = _given(inputs[0])
    layout, hidden = int(attrs.get("layout", 0)), int(_given(inputs[2]).shape[-1])
    direction = str(attrs.get("direction", "forward"))
    dirs = 2 if direction == "bidirectional" else 1
    xs = widen(x).transpose(0, 1) if layout == 1 else widen(x)
    opt = [*inputs[4:7], *[None] * 3]
    lens = opt[0].long() if opt[0] is not None else torch.full((xs.shape[1],), xs.shape[0], dtype=torch.long)
    if lens.numel() and (int(lens.min()) < 0 or int(lens.max()) > xs.shape[0]):
        # beyond the sequence the spec defines nothing: a reduction that shortens X under a
        # kept sequence_lens makes an invalid model, whose crash is no bug
        raise ValueError(f"sequence_lens {lens.tolist()} outside 0..{xs.shape[0]}")
    states = [_state(s, xs, layout, dirs, hidden) for s in opt[1 : 1 + (2 if gates == 4 else 1)]]
    functions = read_functions(attrs, defaults, dirs)
    ys, finals = [], []
    for d in range(dirs):
        back = direction == "reverse" or d == 1
        y, last = _direction(
            cell, xs, [s[d] for s in states], _weights(attrs, inputs, gates, d), functions[d], lens, back
        )
        ys.append(y)
        finals.append(last)
    y_all = torch.stack(ys, dim=1)  # [seq, dirs, batch, hidden]
    outs = [torch.stack([f[k] for f in finals]) for k in range(len(states))]
    if layout == 1:
        y_all, outs = y_all.permute(2, 0, 1, 3), [o.transpose(0, 1) for o in outs]
    return [t.to(x.dtype) for t in (y_all, *outs)]


def _state(h: torch.Tensor | None, xs: torch.Tensor, layout: int, directions: int, hidden: int) -> torch.Tensor:
    """An initial state as [num_directions, batch, hidden]; zeros when the input is absent."""
    if h is None:
        return torch.zeros(directions, xs.shape[1], hidden, dtype=xs.dtype)
    return widen(h).transpose(0, 1) if layout == 1 else widen(h)


class Recurrent(OpSpec):
    """One recurrent layer over a rank-3 sequence from the graph; everything else is owned."""

    gates: ClassVar[int]
    defaults: ClassVar[tuple[str, ...]]
    """The activation functions of one direction when the node names none."""
    optional: ClassVar[tuple[str, ...]] = ("B", "sequence_lens", "initial_h")
    outputs: ClassVar[int] = 2
    clip_drawn: ClassVar[bool] = True
    min_rank = 3
    max_rank = 3
    dtypes = FLOATS_32_FIRST
    since_opset = 7

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rng = self.rng
        self.direction = rng.choice(("forward", "forward", "reverse", "bidirectional", "bidirectional"))
        self.dirs = 2 if self.direction == "bidirectional" else 1
        # layout 1 a quarter of the time: onnxruntime declines it in every release
        self.layout = rng.choice((0, 0, 0, 1)) if sc.opset >= 14 else 0
        self.explicit = rng.random() < 0.3
        """Write attributes at their defaults too (direction, layout, the switches)."""
        self.hidden = sc.var("hidden_size", lo=1, hi=32)
        self.present = {name: rng.random() < 0.6 for name in self.optional}
        self.kept = self._draw_outputs(rng, out)
        self.functions = _positional(_draw_functions(rng, self.defaults, self.dirs))
        self.alphas, self.betas = _draw_params(rng, self.functions or [])
        self.clip = rng.choice((None, None, None, 0.5, 1.0, 3.0)) if self.clip_drawn else None
        self.trim = rng.random() < 0.7
        """Leave trailing absent inputs and outputs out, rather than name them ""."""

    def _draw_outputs(self, rng: random.Random, out: TType | None) -> list[bool]:
        """Which of Y, Y_h (, Y_c) the node names; backward insertion makes exactly the one
        `out` asks for (Y is rank 4, the states rank 3)."""
        if out is not None:
            pick = 0 if out.rank == 4 else rng.randrange(1, self.outputs)
            return [k == pick for k in range(self.outputs)]
        kept = [rng.random() < 0.6 for _ in range(self.outputs)]
        if not any(kept):
            kept[rng.randrange(self.outputs)] = True
        return kept

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype not in cls.dtypes or out.rank not in (3, 4):
            return None
        return [TType(out.dtype, 3)]

    def _dims(self, x: AbsTensor) -> tuple[Dim, Dim, Dim]:
        """seq_length, batch_size, input_size of the sequence."""
        seq, batch = (x.shape[1], x.shape[0]) if self.layout == 1 else (x.shape[0], x.shape[1])
        return seq, batch, x.shape[2]

    def seq_cap(self) -> int:
        names = self.functions or list(self.defaults)
        return UNBOUNDED_SEQ_CAP if any(n in UNBOUNDED for n in names) else SEQ_CAP

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        seq, _, inp = self._dims(ins[0])
        rows = self.dirs * self.gates * self.hidden
        cap = self.sc.max_elements
        return [self.hidden >= 1, seq <= self.seq_cap(), rows * inp <= cap, rows * self.hidden <= cap, 2 * rows <= cap]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        seq, batch, _ = self._dims(ins[0])
        dtype, h = ins[0].dtype, self.hidden
        y = [batch, seq, self.dirs, h] if self.layout == 1 else [seq, self.dirs, batch, h]
        state = [batch, self.dirs, h] if self.layout == 1 else [self.dirs, batch, h]
        shapes = [y, *[state] * (self.outputs - 1)]
        return [AbsTensor(dtype, list(s)) for s, kept in zip(shapes, self.kept, strict=True) if kept]

    def work(self, val: Callable[[Dim], int]) -> int:
        seq, batch, inp = (val(d) for d in self._dims(self.inputs[0]))
        h = val(self.hidden)
        return seq * batch * self.dirs * self.gates * h * (inp + h)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        seq, batch, inp = (em.ival(d) for d in self._dims(x))
        h, rows = em.ival(self.hidden), self.gates * em.ival(self.hidden)
        operands = [
            ins[0],
            em.weight([self.dirs, rows, inp], x.dtype, inp),
            em.weight([self.dirs, rows, h], x.dtype, h),
        ]
        state = [batch, self.dirs, h] if self.layout == 1 else [self.dirs, batch, h]
        for name in self.optional:
            if not self.present[name]:
                operands.append("")
            elif name == "B":
                operands.append(em.weight([self.dirs, 2 * rows], x.dtype, h))
            elif name == "sequence_lens":
                operands.append(em.shape_operand(em.values.integers(1, seq + 1, size=batch), np.int32))
            elif name == "P":
                operands.append(em.weight([self.dirs, 3 * h], x.dtype))
            else:
                operands.append(em.weight(state, x.dtype))
        names = iter(outs)
        results = [next(names) if kept else "" for kept in self.kept]
        em.node(self.op_type, _trimmed(operands, self.trim), _trimmed(results, self.trim), **self.attributes(em, h))

    def attributes(self, em: Emitter, hidden: int) -> dict[str, Any]:
        attrs: dict[str, Any] = {"hidden_size": hidden}
        if self.direction != "forward" or self.explicit:
            attrs["direction"] = self.direction
        if em.opset >= 14 and (self.layout or self.explicit):
            attrs["layout"] = self.layout
        if self.functions is not None:
            attrs["activations"] = self.functions
        if self.alphas:
            attrs["activation_alpha"] = self.alphas
        if self.betas:
            attrs["activation_beta"] = self.betas
        if self.clip is not None:
            attrs["clip"] = self.clip
        return attrs

    @classmethod
    def refusal(cls, version: int, attrs: Attrs) -> str | None:
        """A node naming a function the schema does not list, or leaving out the alpha or
        beta of one without an operator default (Affine, ScaledTanh), means nothing the
        spec defines."""
        why = super().refusal(version, attrs)
        if why is not None:
            return why
        dirs = 2 if attrs.get("direction", "forward") == "bidirectional" else 1
        try:
            read_functions(attrs, cls.defaults, dirs)
        except ValueError as e:
            return f"{cls.op_type}-{version}: {e}"
        return None


def _trimmed(names: list[str], trim: bool) -> list[str]:
    """Trailing absent arguments left out (the schema allows both spellings)."""
    while trim and names and not names[-1]:
        names = names[:-1]
    return names


def _draw_functions(rng: random.Random, defaults: tuple[str, ...], dirs: int) -> list[str] | None:
    """None (the defaults, unnamed) half the time; else each function the default or any
    the schema lists."""
    if rng.random() < 0.5:
        return None
    every = sorted(ACTIVATIONS)
    return [d if rng.random() < 0.4 else rng.choice(every) for _ in range(dirs) for d in defaults]


def _leading(functions: Sequence[str], readers: Collection[str]) -> list[str]:
    """The functions before the first one that does not read the parameter."""
    return list(itertools.takewhile(lambda f: f in readers, functions))


def _positional(functions: list[str] | None) -> list[str] | None:
    """The functions, with a reader that has no default (Affine, ScaledTanh) past the leading
    run of readers made a Tanh. The schema's "consumed in the order of activation functions"
    reads two ways: the next value for each function that reads one (this reference), or
    the value at the function's own position (onnxruntime, whose bounds assertion aborts
    when a list is shorter than that). Lists drawn only for the leading readers mean the
    same either way, and a reader past them must then have a default."""
    if functions is None:
        return None
    alpha_run = len(_leading(functions, PARAMS))
    beta_run = len(_leading(functions, _USES_BETA))
    out = list(functions)
    for k, f in enumerate(out):
        alpha, beta = PARAMS.get(f, (0.0, 0.0))
        if (alpha is None and k >= alpha_run) or (f in _USES_BETA and beta is None and k >= beta_run):
            out[k] = "Tanh"
    return out


def _draw_params(rng: random.Random, functions: Sequence[str]) -> tuple[list[float], list[float]]:
    """Alpha and beta lists for the leading functions that read them (_positional)."""
    alpha_readers = _leading(functions, PARAMS)
    beta_readers = _leading(functions, _USES_BETA)
    return _draw_list(rng, alpha_readers, 0), _draw_list(rng, beta_readers, 1)


def _draw_list(rng: random.Random, readers: list[str], slot: int) -> list[float]:
    """Values for all the readers, or for a prefix of them (the rest take their defaults)
    long enough to reach every reader without a default (Affine, ScaledTanh)."""
    need = max((k + 1 for k, f in enumerate(readers) if PARAMS[f][slot] is None), default=0)
    count = rng.randint(need, len(readers))
    return [rng.choice(_DRAWN_PARAMS[f][slot]) for f in readers[:count]]


@register
class RNN(Recurrent):
    op_type = "RNN"
    gates = 1
    defaults = ("Tanh",)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return recurrence(attrs, list(inputs), rnn_cell, RNN.defaults, RNN.gates)


@register
class GRU(Recurrent):
    op_type = "GRU"
    gates = 3
    defaults = ("Sigmoid", "Tanh")

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.linear_before_reset = self.rng.random() < 0.5

    def attributes(self, em: Emitter, hidden: int) -> dict[str, Any]:
        attrs = super().attributes(em, hidden)
        if self.linear_before_reset or self.explicit:
            attrs["linear_before_reset"] = int(self.linear_before_reset)
        return attrs

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return recurrence(attrs, list(inputs), gru_cell, GRU.defaults, GRU.gates)


@register
class LSTM(Recurrent):
    op_type = "LSTM"
    gates = 4
    defaults = ("Sigmoid", "Tanh", "Tanh")
    optional = ("B", "sequence_lens", "initial_h", "initial_c", "P")
    outputs = 3
    clip_drawn = False
    """The schema applies `clip` "to the input of activations", and h, whose input is the
    cell state, is one; onnxruntime clips only the gates' inputs. Both readings stand on
    the text, so a generated LSTM never has a clip, and no reading is reported as a bug."""

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.input_forget = self.rng.random() < 0.3

    def attributes(self, em: Emitter, hidden: int) -> dict[str, Any]:
        attrs = super().attributes(em, hidden)
        if self.input_forget or self.explicit:
            attrs["input_forget"] = int(self.input_forget)
        return attrs

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return recurrence(attrs, list(inputs), lstm_cell, LSTM.defaults, LSTM.gates)
