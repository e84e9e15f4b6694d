"""Ops that keep a value-dependent subset: Unique (the distinct values of a runtime tensor)
and NonMaxSuppression (the boxes that survive). Their output counts are solved terms, realized
exactly by the runtime values each draws at emission (generator.ops.dynamic says why)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import torch

from generator.dtypes import DType
from generator.ops.base import Attrs, Emitter, OpSpec, register
from generator.ops.dynamic import part_name
from generator.ops.shape import ANY
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, numel

UNIQUE_OUTPUTS = ("indices", "inverse_indices", "counts")
"""Unique's outputs after Y, by slot (1, 2, 3): one of them may be a second output."""


def distinct_slices(rng: np.random.Generator, keep: int, width: int, dim: int) -> list[tuple[int, ...]]:
    """`keep` distinct index tuples of `width` entries in [-dim, dim - 1]."""
    found: dict[tuple[int, ...], None] = {}
    while len(found) < keep:
        found[tuple(int(v) for v in rng.integers(-dim, dim, size=width))] = None
    return list(found)


def unique_indices(rng: np.random.Generator, keep: int, slices: int, width: int, dim: int) -> np.ndarray:
    """`slices` index tuples with exactly `keep` distinct ones, every distinct one present, in
    random order; a [slices, width] int64 array."""
    chosen = distinct_slices(rng, keep, width, dim)
    rows = chosen + [chosen[int(k)] for k in rng.integers(0, keep, size=slices - keep)]
    order = rng.permutation(slices)
    return np.asarray([rows[int(k)] for k in order], dtype=np.int64).reshape(slices, width)


@register
class Unique(OpSpec):
    """torch.unique over a runtime int64 tensor of indices, whose unique values (or rows, or
    columns, with `axis`) a Gather then picks from the input: the count of distinct values is
    solved, and drawn exactly. Sorted or in first-occurrence order; indices, inverse_indices or
    counts may be a second output."""

    op_type = "Unique"
    dtypes = ANY
    max_rank = 3
    node_cost = 2

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.gather_axis = self.rng.randrange(ins[0].rank)
        self.axis: int | None = self.rng.choice((0, 1, -1, -2)) if self.rng.random() < 0.4 else None
        self.flat_rank = self.rng.choice((1, 2))
        self.sorted = self.rng.choice((0, 1))
        self.write_sorted = self.sorted == 0 or self.rng.random() < 0.5
        self.extra = self.rng.choice((None, *UNIQUE_OUTPUTS))
        self.keep = sc.var("unique")
        self.slices = sc.var("slices")
        self.width = sc.var("width", lo=1, hi=3)

    @classmethod
    def schema_allows(cls, opset: int, ins: Sequence[TType]) -> bool:
        """Unique runs on int64 indices whatever the gathered type."""
        return True

    @classmethod
    def support_ops(cls) -> tuple[str, ...]:
        return ("Unique", "Gather")

    @classmethod
    def support_keys(cls, key: DType) -> list[tuple[str, DType]]:
        return [("Unique", DType.int64), ("Gather", key)]

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        return None  # the gathered count is drawn with the values: forward insertion only

    def source_shape(self) -> list[Dim]:
        """The runtime tensor's shape: flat values in one or two dims, or slices along `axis`."""
        if self.axis is None:
            return [self.slices] if self.flat_rank == 1 else [self.width, self.slices]
        return [self.slices, self.width] if self.axis in (0, -2) else [self.width, self.slices]

    def picked_shape(self) -> list[Dim]:
        """Y's shape: the distinct values, rows or columns."""
        if self.axis is None:
            return [self.keep]
        return [self.keep, self.width] if self.axis in (0, -2) else [self.width, self.keep]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        dim = ins[0].shape[self.gather_axis]
        return [self.keep >= 1, self.keep <= 2 * dim, self.slices >= self.keep, self.width >= 1, self.width <= 3]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        s, a = ins[0].shape, self.gather_axis
        outs = [AbsTensor(ins[0].dtype, [*s[:a], *self.picked_shape(), *s[a + 1 :]])]
        if self.extra is not None:
            inverse = numel(self.source_shape()) if self.axis is None else self.slices
            outs.append(AbsTensor(DType.int64, [inverse if self.extra == "inverse_indices" else self.keep]))
        return outs

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        dim = em.ival(self.inputs[0].shape[self.gather_axis])
        keep, slices, width = (em.ival(v) for v in (self.keep, self.slices, self.width))
        if self.axis is None:
            values = unique_indices(em.values, keep, numel([em.ival(d) for d in self.source_shape()]), 1, dim)
        else:
            values = unique_indices(em.values, keep, slices, width, dim)
            values = values if self.axis in (0, -2) else values.T
        source = em.runtime(values.reshape([em.ival(d) for d in self.source_shape()]))
        results = [part_name(outs, 0)]
        if self.extra is not None:
            slot = UNIQUE_OUTPUTS.index(self.extra) + 1
            results += [""] * (slot - 1) + [outs[1]]
        attrs: dict[str, int] = {} if self.axis is None else {"axis": self.axis}
        if self.write_sorted:
            attrs["sorted"] = self.sorted
        em.node("Unique", [source], results, **attrs)
        em.node("Gather", [ins[0], part_name(outs, 0)], outs[:1], axis=self.gather_axis)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        axis = attrs.get("axis")
        dim = None if axis is None else int(axis) % x.dim()
        flat = x.reshape(-1) if dim is None else x
        along = 0 if dim is None else dim
        y, inverse, counts = torch.unique(flat, sorted=True, return_inverse=True, return_counts=True, dim=dim)
        positions = torch.arange(inverse.numel())
        first = torch.full((counts.numel(),), inverse.numel()).scatter_reduce(0, inverse, positions, "amin")
        if not attrs.get("sorted", 1):
            # First-occurrence order: the sorted uniques ranked by where each first appears.
            order = torch.argsort(first)
            rank = torch.empty_like(order)
            rank[order] = torch.arange(order.numel())
            y, first, counts, inverse = y.index_select(along, order), first[order], counts[order], rank[inverse]
        return [y, first, inverse, counts]


BOX = 16.0
"""A box's side: clusters sit 2 * BOX apart (disjoint); a member is its cluster's box moved by
at most a quarter on each axis, so two members overlap with an IoU of 0.88 or more."""
IOU_THRESHOLDS = (0.3, 0.5, 0.7)
"""Every one far from both the IoU inside a cluster (>= 0.88) and the one across them (0)."""
PASS, FAIL = (0.6, 0.99), (0.01, 0.4)
"""Score ranges of a cluster's best box that passes the score threshold (0.5), and of boxes
that do not."""


def cluster_of(rng: np.random.Generator, boxes: int, clusters: int) -> np.ndarray:
    """Which cluster each box belongs to: every cluster used, in random box order."""
    labels = np.concatenate([np.arange(clusters), rng.integers(0, clusters, size=boxes - clusters)])
    return rng.permutation(labels)


def split_count(rng: np.random.Generator, total: int, slots: int, most: int) -> list[int]:
    """`slots` counts in [0, most] summing to `total` (total <= slots * most)."""
    counts = [0] * slots
    for _ in range(total):
        open_slots = [k for k in range(slots) if counts[k] < most]
        counts[int(rng.choice(open_slots))] += 1
    return counts


@register
class NonMaxSuppression(OpSpec):
    """A detection head's box selection: NonMaxSuppression over runtime boxes, scores and
    thresholds, its selected (batch, class, box) triples gathered from the input (GatherND of
    x[B, C, N, ...]), as exported detectors pick the kept boxes' data. The boxes form disjoint
    clusters of heavy overlap and the scores are distinct and far from the score threshold, so
    exactly one selection is right: per class, the best box of each passing cluster, capped by
    max_output_boxes_per_class, in descending score. Their total is the solved count."""

    op_type = "NonMaxSuppression"
    dtypes = ANY
    min_rank = 3
    node_cost = 2

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.center = self.rng.choice((0, 1))
        self.write_center = self.center == 1 or self.rng.random() < 0.5
        self.iou = self.rng.choice(IOU_THRESHOLDS)
        self.keep = sc.var("selected")

    @classmethod
    def schema_allows(cls, opset: int, ins: Sequence[TType]) -> bool:
        """Boxes and scores are float32 whatever the gathered type."""
        return True

    @classmethod
    def support_ops(cls) -> tuple[str, ...]:
        return ("NonMaxSuppression", "GatherND")

    @classmethod
    def support_keys(cls, key: DType) -> list[tuple[str, DType]]:
        return [("NonMaxSuppression", DType.float32), ("GatherND", key)]

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        return None  # the count is drawn with the boxes: forward insertion only

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        batches, classes, boxes = ins[0].shape[:3]
        return [self.keep >= 1, self.keep <= batches * classes * boxes, boxes <= 64]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, [self.keep, *ins[0].shape[3:]])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        batches, classes, boxes = (em.ival(d) for d in self.inputs[0].shape[:3])
        keep, rng = em.ival(self.keep), em.values
        clusters = int(rng.integers(-(-keep // (batches * classes)), boxes + 1))
        counts = split_count(rng, keep, batches * classes, clusters)
        cap = max(counts) if rng.random() < 0.5 else int(rng.integers(max(counts), clusters + 1))
        corners = np.zeros((batches, boxes, 4), dtype=np.float32)
        scores = np.zeros((batches, classes, boxes), dtype=np.float32)
        for b in range(batches):
            label = cluster_of(rng, boxes, clusters)
            corners[b] = self._boxes(rng, label)
            for c in range(classes):
                selected = counts[b * classes + c]
                # Where the cap is reached, more clusters may pass than it keeps.
                passing = int(rng.integers(selected, clusters + 1)) if selected == cap else selected
                scores[b, c] = self._scores(rng, label, clusters, passing)
        data = corners if not self.center else self._centered(corners)
        operands = [
            em.runtime(data),
            em.runtime(scores),
            em.runtime(np.asarray([cap], dtype=np.int64)),
            em.runtime(np.asarray([self.iou], dtype=np.float32)),
            em.runtime(np.asarray([0.5], dtype=np.float32)),
        ]
        attrs = {"center_point_box": self.center} if self.write_center else {}
        em.node("NonMaxSuppression", operands, [part_name(outs, 0)], **attrs)
        em.node("GatherND", [ins[0], part_name(outs, 0)], outs)

    @staticmethod
    def _boxes(rng: np.random.Generator, label: np.ndarray) -> np.ndarray:
        """[y1, x1, y2, x2] per box: its cluster's square, moved by -1/4, 0 or 1/4 of a unit."""
        jitter = rng.choice(np.array([-0.25, 0.0, 0.25]), size=(label.size, 2))
        top_left = np.stack([2 * BOX * label, np.zeros(label.size)], axis=1) + jitter
        corners: np.ndarray = np.concatenate([top_left, top_left + BOX], axis=1).astype(np.float32)
        return corners

    @staticmethod
    def _centered(corners: np.ndarray) -> np.ndarray:
        """The same boxes as [x_center, y_center, width, height]."""
        y1, x1, y2, x2 = (corners[..., k] for k in range(4))
        centered: np.ndarray = np.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], axis=-1)
        return centered.astype(np.float32)

    @staticmethod
    def _scores(rng: np.random.Generator, label: np.ndarray, clusters: int, passing: int) -> np.ndarray:
        """One class's scores: the best box of `passing` clusters above the threshold, at
        distinct values; every other box below its cluster's best, or below the threshold."""
        scores = rng.uniform(*FAIL, size=label.size)
        tops = np.linspace(*PASS, num=clusters)[rng.permutation(clusters)][:passing]
        for cluster, top in zip(rng.permutation(clusters)[:passing], tops, strict=True):
            members = np.flatnonzero(label == cluster)
            best = int(rng.choice(members))
            scores[members] = top - rng.uniform(0.05, 0.5, size=members.size)
            scores[best] = top
        out: np.ndarray = scores.astype(np.float32)
        return out

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        boxes, scores = inputs[0].double(), inputs[1].double()
        given = [_first(inputs[k]) if len(inputs) > k else None for k in (2, 3, 4)]
        cap = int(given[0]) if given[0] is not None else 0
        iou = given[1] if given[1] is not None else 0.0
        if attrs.get("center_point_box", 0):
            half = boxes[..., 2:] / 2
            xy = torch.cat([boxes[..., :2] - half, boxes[..., :2] + half], dim=-1)
            boxes = xy[..., [1, 0, 3, 2]]
        low = torch.minimum(boxes[..., :2], boxes[..., 2:])
        high = torch.maximum(boxes[..., :2], boxes[..., 2:])
        found: list[list[int]] = []
        for b in range(scores.shape[0]):
            overlaps = box_iou(low[b], high[b])
            for c in range(scores.shape[1]):
                found += [[b, c, k] for k in greedy(scores[b, c], overlaps, cap, iou, given[2])]
        return [torch.tensor(found, dtype=torch.int64).reshape(-1, 3)]


def _first(t: torch.Tensor | None) -> float | None:
    """An optional scalar input's value: None where absent (named "") or empty."""
    return float(t.reshape(-1)[0]) if t is not None and t.numel() else None


def box_iou(low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """IoU of every pair of boxes given by their low and high corners ([N, 2] each); 0 where
    they do not overlap or a box has no area."""
    inter = (torch.minimum(high[:, None], high[None]) - torch.maximum(low[:, None], low[None])).clamp(min=0).prod(-1)
    area = (high - low).prod(-1)
    union = area[:, None] + area[None] - inter
    valid = (inter > 0) & (area[:, None] > 0) & (area[None] > 0) & (union > 0)
    return torch.where(valid, inter / union.where(valid, torch.ones_like(union)), torch.zeros_like(union))


def greedy(scores: torch.Tensor, overlaps: torch.Tensor, cap: int, iou: float, floor: float | None) -> list[int]:
    """ONNX's selection in one class: boxes above the score floor from the best down (ties to
    the lower index), each kept unless it overlaps a kept one by more than `iou`, up to `cap`."""
    order = sorted(range(scores.numel()), key=lambda k: (-float(scores[k]), k))
    kept: list[int] = []
    for k in order:
        if len(kept) >= cap or (floor is not None and float(scores[k]) <= floor):
            break
        if all(float(overlaps[k, j]) <= iou for j in kept):
            kept.append(k)
    return kept
