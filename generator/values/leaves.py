"""The searched values: float leaves as one flat master vector, integer leaves as tensors.

One flat vector keeps an optimiser step to a handful of torch calls however many inputs
and weights a model has. The master is float32 (float64 when a leaf is float64); each
leaf is a view cast to its own dtype, so a float16 model is evaluated, and exported,
with exactly the float16 values that were checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import torch

from generator.ops.narrow import as_numpy
from generator.ops.unsigned import signed_view
from generator.values.interp import as_tensor

PARTIAL = 0.25
"""Share of a float leaf's elements redrawn when the unsafe positions cannot be traced to it."""

INT_RANGE = (-8, 8)
"""Where integer leaves are redrawn from, as the generator draws them."""


@dataclass(frozen=True)
class Span:
    name: str
    start: int
    stop: int
    shape: tuple[int, ...]
    dtype: torch.dtype
    scale: float
    """Half-width of the leaf's initial values, reused when it is redrawn."""


class Leaves:
    def __init__(self, initial: Mapping[str, np.ndarray]) -> None:
        self.spans: dict[str, Span] = {}
        self.ints: dict[str, torch.Tensor] = {}
        self.fixed: dict[str, torch.Tensor] = {}
        chunks: list[torch.Tensor] = []
        offset = 0
        wide = any(a.dtype == np.float64 for a in initial.values())
        self.master_dtype = torch.float64 if wide else torch.float32
        for name, a in initial.items():
            t = as_tensor(a)
            if t.is_floating_point():
                scale = float(np.abs(a).max()) if a.size else 1.0
                n = t.numel()
                self.spans[name] = Span(name, offset, offset + n, tuple(t.shape), t.dtype, scale or 1.0)
                chunks.append(t.reshape(-1).to(self.master_dtype))
                offset += n
            elif t.dtype == torch.bool:
                self.fixed[name] = t
            else:
                self.ints[name] = t
        self.theta = torch.cat(chunks) if chunks else torch.zeros(0, dtype=self.master_dtype)

    def tensors(self, grad: bool) -> dict[str, torch.Tensor]:
        """Leaf tensors for one evaluation; with `grad`, they are views of a fresh leaf `theta`."""
        theta = self.theta.detach().requires_grad_(grad)
        self.theta = theta
        out: dict[str, torch.Tensor] = {**self.fixed, **self.ints}
        for s in self.spans.values():
            out[s.name] = theta[s.start : s.stop].view(s.shape).to(s.dtype)
        return out

    def shape(self, name: str) -> tuple[int, ...] | None:
        if name in self.spans:
            return self.spans[name].shape
        return tuple(self.ints[name].shape) if name in self.ints else None

    def redraw(
        self,
        names: Iterable[str],
        rng: np.random.Generator,
        where: torch.Tensor | None = None,
        values: list[int] | None = None,
        traced: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        """Fresh values for these leaves, only at the elements `where` marks if it folds onto
        the leaf's shape (an elementwise path), else everywhere. `values`: draw from these
        (an integer predicate's safe set), otherwise from the range the leaf started in.
        `traced`: per leaf, the elements known exactly to land on `where` (see trace.py),
        used instead of folding."""
        theta = self.theta.detach().clone()
        for name in names:
            known = traced.get(name) if traced is not None else None
            if name in self.spans:
                s = self.spans[name]
                view = theta[s.start : s.stop].view(s.shape)
                mark = known if known is not None else self._marks(where, s.shape, rng)
                _refill(view, mark, rng, values, s.scale)
            elif name in self.ints:
                t = self.ints[name].clone()
                mark = known if known is not None else self._marks(where, tuple(t.shape), rng, whole=True)
                _refill(t, mark, rng, values, None)
                self.ints[name] = t
            elif name in self.fixed and values is not None:
                # A boolean behind a divisor (Cast(b) as divisor): a nonzero value is True.
                b = self.fixed[name].clone()
                mark = known if known is not None else self._marks(where, tuple(b.shape), rng, whole=True)
                _refill(b, mark, rng, values, None)
                self.fixed[name] = b
        self.theta = theta

    @staticmethod
    def _marks(
        where: torch.Tensor | None, shape: tuple[int, ...], rng: np.random.Generator, whole: bool = False
    ) -> torch.Tensor | None:
        """The elements to redraw: `where` folded onto the leaf; when it does not fold (a
        reduction or a Gather lies between), a random quarter of them for a float leaf, so
        that what already works mostly survives, and all of them for a discrete (`whole`)
        leaf: a value set like {0} that an Asin of a sum needs has to reach every element
        at once, which quarters drawn from a fresh set each round almost never do. Every
        element when no `where` is given."""
        if where is None:
            return None
        folded = fold(where, shape)
        if folded is not None:
            return folded
        if where.numel() == int(np.prod(shape)):
            # Same element count: most often a Reshape, Flatten or Squeeze lies between,
            # which keep the elements' order, so the unsafe positions map one to one.
            return where.reshape(shape).clone()
        return None if whole else torch.from_numpy(rng.random(size=shape) < PARTIAL)

    def sample(self, rng: np.random.Generator, ranges: list[tuple[float, float]]) -> None:
        """Every leaf anew; floats from one of `ranges` (in units of the leaf's scale) each."""
        theta = torch.empty_like(self.theta.detach())
        for s in self.spans.values():
            lo, hi = ranges[int(rng.integers(len(ranges)))]
            fresh = rng.uniform(lo * s.scale, hi * s.scale, size=s.stop - s.start)
            theta[s.start : s.stop] = torch.from_numpy(fresh).to(theta.dtype)
        self.theta = theta
        for name, t in self.ints.items():
            self.ints[name] = _draw_ints(rng, t)

    def sanitize(self, rng: np.random.Generator) -> None:
        """Non-finite master entries (a runaway step) are replaced by small random values."""
        bad = ~torch.isfinite(self.theta)
        if bool(bad.any()):
            theta = self.theta.detach().clone()
            theta[bad] = torch.from_numpy(rng.uniform(-1, 1, size=int(bad.sum()))).to(theta.dtype)
            self.theta = theta

    def export(self) -> dict[str, np.ndarray]:
        theta = self.theta.detach()
        out = {n: as_numpy(t).copy() for n, t in {**self.fixed, **self.ints}.items()}
        for s in self.spans.values():
            out[s.name] = as_numpy(theta[s.start : s.stop].view(s.shape).to(s.dtype)).copy()
        return out


def _draw_ints(rng: np.random.Generator, like: torch.Tensor) -> torch.Tensor:
    lo, hi = INT_RANGE
    if not like.dtype.is_signed:
        lo = 0
    fresh = rng.integers(lo, hi + 1, size=tuple(like.shape))
    return torch.from_numpy(fresh).to(like.dtype)


def _refill(
    t: torch.Tensor, mask: torch.Tensor | None, rng: np.random.Generator, values: list[int] | None, scale: float | None
) -> None:
    """Overwrite `t` in place at `mask` (everywhere when None)."""
    n = int(mask.sum()) if mask is not None else t.numel()
    if values is not None:
        fresh = rng.choice(np.asarray(values), size=n)
    elif scale is not None:
        fresh = rng.uniform(-scale, scale, size=n)
    else:
        lo = INT_RANGE[0] if t.dtype.is_signed else 0
        fresh = rng.integers(lo, INT_RANGE[1] + 1, size=n)
    src = torch.from_numpy(np.asarray(fresh)).to(t.dtype)
    if mask is None:
        t.copy_(src.view(t.shape))
    else:
        signed_view(t)[mask] = signed_view(src)


def fold(mask: torch.Tensor | None, shape: tuple[int, ...]) -> torch.Tensor | None:
    """A mask over a broadcast result, folded back onto an operand of `shape`: an element is
    marked if any position it was broadcast to is. None when the shapes do not line up
    (a reshape or reduction lies between), so the caller treats every element as marked."""
    if mask is None or len(shape) > mask.dim():
        return None
    extra = mask.dim() - len(shape)
    if any(n not in (1, m) for n, m in zip(shape, mask.shape[extra:], strict=True)):
        return None
    if extra:
        mask = mask.any(dim=tuple(range(extra)))
    dims = tuple(i for i, n in enumerate(shape) if n == 1 and mask.shape[i] != 1)
    if dims:
        mask = mask.any(dim=dims, keepdim=True)
    return mask.expand(shape).clone() if tuple(mask.shape) != shape else mask
