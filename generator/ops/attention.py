"""The transformer-block ops of opset 23: RMSNormalization, RotaryEmbedding and Attention.

Exported language models carry them as single nodes from opset 23 on, where older exports
spelled them as chains of Pow, ReduceMean, Gather, Softmax and MatMul. A build meets them in
kernels and fusions of their own, and those are what these specs reach. The references follow
the spec's own equations, computed in float32 for float16 (the spec's stash type) and rounded
once, as the builds' kernels do.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import torch

from generator.dtypes import DType
from generator.ops.base import Attrs, Emitter, OpSpec, Reference, SameShapeOp, axis_of, register
from generator.ops.nn import widen
from generator.symbolic import AbsTensor, Cond, SymCtx, TType

HALF_AND_SINGLE = (DType.float32, DType.float16)
"""What these specs generate. The schemas take float64 too (not RotaryEmbedding), but for
RMSNormalization the spec computes a float64 input in its float32 stash type, where onnxruntime
1.31.1 and onnx.reference compute in float64: no answer both readings share."""


def _stashed(x: torch.Tensor, stash_type: int) -> torch.Tensor:
    """The input in the precision the spec computes in: float32 unless `stash_type` names
    another (onnxruntime implements only float32, stash_type 1)."""
    return x.to(getattr(torch, DType.from_onnx(stash_type).value))


@register
class RMSNormalization(SameShapeOp):
    """x / sqrt(mean(x^2 over the axes from `axis`) + epsilon) * scale, the scale either the
    normalized shape or its last dim alone (broadcast, as LLaMA's checkpoints store it)."""

    op_type = "RMSNormalization"
    since_opset = 23
    dtypes = HALF_AND_SINGLE
    max_rank = 4

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.axis = self.rng.choice((-1, -1, -1, self.rng.randint(-rank, rank - 1)))
        self.last_only = self.rng.random() < 0.3
        self.epsilon = self.rng.choice((1e-5, 1e-6, 1e-3))
        self.explicit = self.rng.random() < 0.5

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        shape = [em.ival(d) for d in x.shape[self.axis :]]
        scale = em.weight(shape[-1:] if self.last_only else shape, x.dtype)
        attrs: dict[str, float | int] = {}
        if self.axis != -1 or self.explicit:
            attrs["axis"] = self.axis
        if self.epsilon != 1e-5 or self.explicit:
            attrs["epsilon"] = self.epsilon
        if self.explicit:
            attrs["stash_type"] = 1
        em.node(self.op_type, [ins[0], scale], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, scale = inputs[0], inputs[1]
        axis = axis_of(attrs, "axis", -1, x.dim())
        xs = _stashed(x, int(attrs.get("stash_type", 1)))
        mean_square = (xs * xs).mean(dim=list(range(axis, x.dim())), keepdim=True)
        normalized = (xs / torch.sqrt(mean_square + float(attrs.get("epsilon", 1e-5)))).to(x.dtype)
        return [(widen(normalized) * widen(scale)).to(scale.dtype)]


@register
class RotaryEmbedding(SameShapeOp):
    """Rotates each head's first `rotary_embedding_dim` features pairwise by the cached angle of
    its position. The input is [batch, heads, seq, head] or [batch, seq, heads * head] with
    `num_heads`; the caches are cos and sin of real RoPE angles, indexed by constant
    position ids or already gathered per token."""

    op_type = "RotaryEmbedding"
    since_opset = 23
    dtypes = HALF_AND_SINGLE
    min_rank = 3
    max_rank = 3 + 1

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.heads = self.rng.choice((1, 2, 4)) if ins[0].rank == 3 else 0
        self.partial = self.rng.random() < 0.3
        self.interleaved = self.rng.random() < 0.5
        self.position_ids = self.rng.random() < 0.6

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        last = ins[0].shape[-1]
        return [last % (2 * self.heads) == 0] if self.heads else [last % 2 == 0]

    def _dims(self, em: Emitter) -> tuple[int, int, int]:
        """(batch, sequence, head size) of the solved input."""
        dims = [em.ival(d) for d in self.inputs[0].shape]
        if self.heads:
            return dims[0], dims[1], dims[2] // self.heads
        return dims[0], dims[2], dims[3]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        batch, seq, head = self._dims(em)
        half = max(1, head // 4) if self.partial else head // 2
        positions = seq + int(em.values.integers(0, 4))
        inv_freq = 1.0 / (10000.0 ** (np.arange(half) / half))
        if self.position_ids:
            angles = np.arange(positions)[:, None] * inv_freq[None, :]
            start = em.values.integers(0, positions - seq + 1, size=(batch, 1))
            ids = [em.const((start + np.arange(seq)[None, :]).astype(np.int64))]
        else:
            offsets = em.values.integers(0, 4, size=(batch, 1, 1))
            angles = (offsets + np.arange(seq)[None, :, None]) * inv_freq[None, None, :]
            ids = []
        dtype = self.inputs[0].dtype.numpy
        caches = [em.const(np.cos(angles).astype(dtype)), em.const(np.sin(angles).astype(dtype))]
        attrs: dict[str, int] = {}
        if self.heads:
            attrs["num_heads"] = self.heads
        if self.partial:
            attrs["rotary_embedding_dim"] = 2 * half
        if self.interleaved:
            attrs["interleaved"] = 1
        em.node(self.op_type, [ins[0], *caches, *ids], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, cos, sin = inputs[0], widen(inputs[1]), widen(inputs[2])
        ids = inputs[3] if len(inputs) > 3 and inputs[3] is not None else None
        if x.dim() == 4:  # [batch, heads, seq, head] -> [batch, seq, heads, head]
            t = widen(x).transpose(1, 2)
        else:
            heads = int(attrs["num_heads"])
            t = widen(x).reshape(x.shape[0], x.shape[1], heads, x.shape[2] // heads)
        rot = int(attrs.get("rotary_embedding_dim", 0)) or t.shape[-1]
        if ids is not None:
            cos, sin = cos[ids.long()], sin[ids.long()]
        cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
        turned, kept = t[..., :rot], t[..., rot:]
        if attrs.get("interleaved", 0):
            x1, x2 = turned[..., 0::2], turned[..., 1::2]
        else:
            x1, x2 = turned[..., : rot // 2], turned[..., rot // 2 :]
        real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
        if attrs.get("interleaved", 0):
            turned = torch.stack((real, imag), dim=-1).reshape(turned.shape)
        else:
            turned = torch.cat((real, imag), dim=-1)
        y = torch.cat((turned, kept), dim=-1)
        y = y.transpose(1, 2) if x.dim() == 4 else y.reshape(x.shape)
        return [y.to(x.dtype)]


MASKS = ("none", "none", "bool", "float")
MASK_SHAPES = ("2d", "1x1", "bx1", "full")


@register
class Attention(OpSpec):
    """Scaled dot-product attention with the query from the graph. Keys and values are the
    query itself (self-attention, written Attention(x, x, x)) or owned constants with their own
    sequence length, value width and fewer heads (grouped-query and multi-query attention).

    Only the forms every version from 23 on computes alike are written: a causal mask on
    self-attention alone (where top-left and bottom-right alignment coincide), no past state,
    and a boolean mask that leaves every query at least one key (opset 25 made a fully masked
    row zeros where 23 gave NaN)."""

    op_type = "Attention"
    since_opset = 23
    dtypes = HALF_AND_SINGLE
    min_rank = 3
    max_rank = 4

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.heads = self.rng.choice((1, 2, 4)) if ins[0].rank == 3 else 0
        self.cross = self.rng.random() < 0.5
        self.v_head = sc.var("v_head", lo=1, hi=16) if self.cross else None
        self.kv_heads = self.rng.choice(("all", "one", "some")) if self.cross else "all"
        self.causal = not self.cross and self.rng.random() < 0.4
        self.mask = self.rng.choice(MASKS)
        self.mask_shape = self.rng.choice(MASK_SHAPES)
        self.scale = self.rng.choice((None, None, 0.125, 0.5, 1.0))
        self.softcap = self.rng.choice((None, None, None, 2.0, 30.0))
        self.precision = self.rng.random() < 0.2

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [ins[0].shape[-1] % self.heads == 0] if self.heads else []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape = list(ins[0].shape)
        if self.v_head is not None:
            shape[-1] = self.v_head * self.heads if self.heads else self.v_head
        return [AbsTensor(ins[0].dtype, shape)]

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        return None if self.cross else [list(out_shape)]

    def _heads(self, em: Emitter) -> tuple[int, int, int, int, int]:
        """(batch, query heads, key/value heads, query sequence, head size) of the solved input."""
        dims = [em.ival(d) for d in self.inputs[0].shape]
        heads = self.heads or dims[1]
        divisors = [h for h in range(1, heads + 1) if heads % h == 0]
        kv = {"all": heads, "one": 1, "some": divisors[len(divisors) // 2]}[self.kv_heads]
        if self.heads:
            return dims[0], heads, kv, dims[1], dims[2] // heads
        return dims[0], heads, kv, dims[2], dims[3]

    def _key_value(self, em: Emitter, ins: list[str], dims: tuple[int, int, int, int, int]) -> tuple[list[str], int]:
        """The K and V operands and the key sequence length."""
        batch, _, kv, seq, head = dims
        if not self.cross or self.v_head is None:
            return [ins[0], ins[0]], seq
        kv_seq, v_head = int(em.values.integers(1, 9)), em.ival(self.v_head)
        dtype = self.inputs[0].dtype
        if self.heads:
            return [
                em.weight([batch, kv_seq, kv * head], dtype),
                em.weight([batch, kv_seq, kv * v_head], dtype),
            ], kv_seq
        return [em.weight([batch, kv, kv_seq, head], dtype), em.weight([batch, kv, kv_seq, v_head], dtype)], kv_seq

    def _mask(self, em: Emitter, dims: tuple[int, int, int, int, int], kv_seq: int) -> list[str]:
        if self.mask == "none":
            return []
        batch, heads, _, seq, _ = dims
        lead = {"2d": [], "1x1": [1, 1], "bx1": [batch, 1], "full": [batch, heads]}[self.mask_shape]
        shape = [*lead, seq, kv_seq]
        if self.mask == "float":
            return [em.weight(shape, self.inputs[0].dtype)]
        keep = em.values.random(shape) < 0.7
        keep[..., 0] = True  # every query attends at least its first key
        return [em.const(keep)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        dims = self._heads(em)
        key_value, kv_seq = self._key_value(em, ins, dims)
        attrs: dict[str, float | int] = {}
        if self.heads:
            attrs.update(q_num_heads=dims[1], kv_num_heads=dims[2])
        if self.causal:
            attrs["is_causal"] = 1
        if self.scale is not None:
            attrs["scale"] = self.scale
        if self.softcap is not None:
            attrs["softcap"] = self.softcap
        if self.precision:
            attrs["softmax_precision"] = 1
        em.node(self.op_type, [ins[0], *key_value, *self._mask(em, dims, kv_seq)], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return _attention(attrs, inputs, zero_empty_rows=False)

    @classmethod
    def reference_at(cls, version: int) -> Reference:
        """From 25 a query row with no key left gives zeros; before, the softmax of an all
        -inf row gave NaN."""
        return cls.reference if version < 25 else functools.partial(_attention, zero_empty_rows=True)


def _attention(attrs: Attrs, inputs: list[torch.Tensor], zero_empty_rows: bool) -> list[torch.Tensor]:
    q, k, v = (widen(t) for t in inputs[:3])
    mask = inputs[3] if len(inputs) > 3 else None
    past = inputs[4:6] if len(inputs) > 5 and inputs[4] is not None else None
    nonpad = inputs[6] if len(inputs) > 6 else None
    three_d = q.dim() == 3
    if three_d:
        q = _split_heads(q, int(attrs["q_num_heads"]))
        k, v = (_split_heads(t, int(attrs["kv_num_heads"])) for t in (k, v))
    if past is not None:
        k, v = torch.cat((widen(past[0]), k), dim=2), torch.cat((widen(past[1]), v), dim=2)
    present = [k, v]
    groups = q.shape[1] // k.shape[1]
    keys, values = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scale = float(attrs.get("scale", 1.0 / float(q.shape[-1]) ** 0.5))
    scores = scale * torch.matmul(q, keys.transpose(-1, -2))
    raw = scores
    softcap = float(attrs.get("softcap", 0.0))
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    scores = scores + _bias(attrs, mask, scores, 0 if past is None else past[0].shape[2], nonpad)
    probs = torch.softmax(scores, dim=-1)
    if zero_empty_rows:
        probs = torch.nan_to_num(probs, nan=0.0)
    y = torch.matmul(probs, values)
    if three_d:
        y = y.transpose(1, 2).reshape(y.shape[0], y.shape[2], -1)
    dtype = inputs[0].dtype
    return [y.to(dtype), present[0].to(dtype), present[1].to(inputs[2].dtype), raw.to(dtype)]


def _split_heads(t: torch.Tensor, heads: int) -> torch.Tensor:
    """[batch, seq, heads * size] -> [batch, heads, seq, size]."""
    return t.reshape(t.shape[0], t.shape[1], heads, -1).transpose(1, 2)


def _bias(
    attrs: Attrs, mask: torch.Tensor | None, scores: torch.Tensor, past_len: int, nonpad: torch.Tensor | None
) -> torch.Tensor:
    """What is added to the scores: -inf where the causal rule, a boolean mask or a batch row's
    padding (`nonpad_kv_seqlen`, from 24) forbids a key, a float mask as it is."""
    bias = torch.zeros(scores.shape[-2:], dtype=scores.dtype)
    if nonpad is not None:
        if attrs.get("is_causal", 0):
            raise ValueError("a causal mask beside nonpad_kv_seqlen is aligned differently by 24 and 25")
        padded = torch.arange(scores.shape[-1]).unsqueeze(0) >= nonpad.long().unsqueeze(1)
        bias = bias + torch.zeros(padded.shape, dtype=scores.dtype).masked_fill(padded, float("-inf"))[:, None, None, :]
    if attrs.get("is_causal", 0):
        rows = torch.arange(scores.shape[-2]).unsqueeze(1) + past_len
        bias = bias.masked_fill(torch.arange(scores.shape[-1]).unsqueeze(0) > rows, float("-inf"))
    if mask is None:
        return bias
    if mask.dtype == torch.bool:
        return bias + torch.zeros_like(mask, dtype=scores.dtype).masked_fill(~mask, float("-inf"))
    return bias + widen(mask)
