"""Known bugs that flip at one release: what bench/regressions_found.py measures a PR check by.

Each flip is a real bug that appears (a regression) or goes away (a fix) between two
consecutive releases, with a standalone repro kept in tests/ and verified on both sides of
the flip (tests/release_cases.py with tests/oracles/test_release_pairs.py for onnxruntime;
tests/narrow_repo.py with tests/product/test_narrow_history.py for narrowcc's two pass regressions).

A campaign's finding *is* a flip's bug when it carries the flip's label across the two
releases (new_regression or fixed) and its reduced model holds the flip's trigger: the op
types and producer-to-consumer edges of the repro, matched as a subgraph by the same code
that keeps known bugs out of generation (generator.avoid). The release that flips it is the
campaign's own pair, so the label says the flip happened there.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from generator.avoid import PatternNode, Trigger

ORT = "onnxruntime"
NARROW = "narrowcc"


def _chain(*ops: str, dtypes: tuple[str, ...] | None = None) -> Trigger:
    """A trigger of ops feeding one another in order (each node's first input dtype in `dtypes`)."""
    allowed = frozenset(dtypes) if dtypes is not None else None
    nodes = tuple(PatternNode(op, allowed if i == 0 else None) for i, op in enumerate(ops))
    return Trigger(nodes, tuple((i, i + 1) for i in range(len(ops) - 1)))


@dataclass(frozen=True)
class Flip:
    name: str
    system: str
    """onnxruntime (pip releases) or narrowcc (refs of tests/narrow_repo.py's history)."""
    base: str
    head: str
    label: str
    """The finding's label across the pair: new_regression or fixed."""
    trigger: Trigger
    repro: str
    """The repro: a function of tests/release_cases.py or tests/narrow_repo.py."""
    reachable: str = ""
    """How generation can make it (a template's near miss, an edge input, an op alone)."""

    @property
    def half(self) -> str:
        """`tune` or `report`, fixed by the flip's name alone (SPLIT_SALT): guidance is tuned
        on the first half and measured on the second, which adding a flip never reshuffles."""
        return HALVES[hashlib.sha256(f"{SPLIT_SALT}:{self.name}".encode()).digest()[0] % 2]


SPLIT_SALT = "known-flips-2026-11-29"
HALVES = ("tune", "report")


RMS_NORM = _chain("Pow", "ReduceMean", "Add", "Sqrt", "Div", "Mul")
DQ_INT8_RESHAPE = _chain("DequantizeLinear", "Reshape", dtypes=("int8",))
PAD_WRAP = Trigger((PatternNode("Pad", attrs=frozenset({("mode", "wrap")})),))
CAST_BOOL_SHAPE_GATHER = Trigger(
    (PatternNode("Cast", attrs=frozenset({("to", "9")})), PatternNode("Shape"), PatternNode("Gather")), ((0, 1), (1, 2))
)

FLIPS: tuple[Flip, ...] = (
    Flip(
        "rms_norm_axis_not_last", ORT, "1.15.1", "1.16.3", "fixed", RMS_NORM, "rms_norm_axis_not_last", "RmsNorm~axis"
    ),
    Flip(
        "clip_fp16_min_only",
        ORT,
        "1.18.1",
        "1.19.0",
        "new_regression",
        _chain("Clip", dtypes=("float16",)),
        "clip_fp16_min_only",
        "Clip, form min, at float16",
    ),
    Flip(
        "maxpool_after_zero_pad",
        ORT,
        "1.19.2",
        "1.20.1",
        "new_regression",
        _chain("Pad", "MaxPool"),
        "maxpool_after_zero_pad",
        "PadWindow~max_pool",
    ),
    Flip(
        "clip_fp16_min_only_fixed",
        ORT,
        "1.19.2",
        "1.20.1",
        "fixed",
        _chain("Clip", dtypes=("float16",)),
        "clip_fp16_min_only",
        "Clip, form min, at float16",
    ),
    Flip(
        "layernorm_single_element_axis",
        ORT,
        "1.20.1",
        "1.21.1",
        "new_regression",
        _chain("LayerNormalization"),
        "layernorm_single_element_axis",
        "LayerNormalization over a unit dim (edge: unit_dims)",
    ),
    Flip(
        "layernorm_single_element_axis_fixed",
        ORT,
        "1.23.2",
        "1.24.4",
        "fixed",
        _chain("LayerNormalization"),
        "layernorm_single_element_axis",
        "LayerNormalization over a unit dim (edge: unit_dims)",
    ),
    Flip(
        "div_by_zero_crash_fixed",
        ORT,
        "1.24.4",
        "1.25.1",
        "fixed",
        _chain("Div", dtypes=("int32", "int64")),
        "div_int32_by_zero",
        "edge: zero_divisor",
    ),
    Flip(
        "rms_norm_vector_epsilon",
        ORT,
        "1.26.0",
        "1.27.0",
        "new_regression",
        RMS_NORM,
        "rms_norm_vector_epsilon",
        "RmsNorm~vector_epsilon",
    ),
    Flip(
        "rms_norm_epsilon_first",
        ORT,
        "1.27.0",
        "1.28.0",
        "fixed",
        RMS_NORM,
        "rms_norm_epsilon_first",
        "RmsNorm~epsilon_first",
    ),
    Flip(
        "narrowcc_sink_softmax",
        NARROW,
        "head",
        "leaky",
        "new_regression",
        _chain("Transpose", "Softmax"),
        "softmax_case",
        "Transpose feeding Softmax",
    ),
    Flip(
        "narrowcc_fold_leaky_clip",
        NARROW,
        "head",
        "leaky",
        "new_regression",
        _chain("LeakyRelu", "Clip"),
        "leaky_case",
        "LeakyRelu feeding a Clip of form max or none",
    ),
)


# Grown from fuzzbot's own campaigns between consecutive releases (each repro's docstring in
# tests/release_cases.py says which campaign found it), every flip checked with `fuzzbot check`
# on both releases of its pair.
FLIPS += (
    Flip(
        "shape_gather_after_cast",
        ORT,
        "1.24.4",
        "1.25.1",
        "new_regression",
        CAST_BOOL_SHAPE_GATHER,
        "shape_gather_after_cast",
        "Cast to bool feeding Shape feeding Gather (SIGABRT while optimizing)",
    ),
    Flip(
        "shape_gather_after_cast_fixed",
        ORT,
        "1.27.0",
        "1.28.0",
        "fixed",
        CAST_BOOL_SHAPE_GATHER,
        "shape_gather_after_cast",
        "Cast to bool feeding Shape feeding Gather",
    ),
    Flip(
        "rnn_unread_alpha_fixed",
        ORT,
        "1.28.0",
        "1.29.0",
        "fixed",
        _chain("RNN"),
        "relu_then_rnn_with_an_unread_alpha",
        "a bidirectional RNN with an activation_alpha its activations do not read",
    ),
    Flip(
        "quick_gelu_float64_fixed",
        ORT,
        "1.30.0",
        "1.31.1",
        "fixed",
        _chain("Sigmoid", "Mul", dtypes=("float64",)),
        "quick_gelu_float64",
        "QuickGelu~ at float64 (x * Sigmoid(x) * 1.702)",
    ),
    Flip(
        "average_pool_after_zero_pad_explicit_pads",
        ORT,
        "1.18.1",
        "1.19.0",
        "new_regression",
        Trigger(
            (PatternNode("Pad"), PatternNode("AveragePool", attrs=frozenset({("pads", "[0, 0]")}))),
            ((0, 1),),
        ),
        "average_pool_after_zero_pad_explicit_pads",
        "PadWindow~ into AveragePool, kernel 1, its pads written at their default",
    ),
    Flip(
        "average_pool_after_zero_pad",
        ORT,
        "1.19.2",
        "1.20.1",
        "new_regression",
        _chain("Pad", "AveragePool"),
        "average_pool_after_zero_pad",
        "PadWindow~ into AveragePool, kernel 1",
    ),
    Flip(
        "dequantize_slice_read_by_branches",
        ORT,
        "1.18.1",
        "1.19.0",
        "new_regression",
        _chain("DequantizeLinear", "Slice"),
        "dequantize_slice_read_by_branches",
        "DequantizeLinear -> Slice read only inside an If's branches (SIGABRT while optimizing)",
    ),
    Flip(
        "dequantize_int8_reshape_opset21",
        ORT,
        "1.18.1",
        "1.19.0",
        "new_regression",
        DQ_INT8_RESHAPE,
        "dequantize_int8_reshape",
        "DequantizeLinear of int8 with no zero point, into a Reshape, at opset 21",
    ),
    Flip(
        "dequantize_int8_reshape_opset21_fixed",
        ORT,
        "1.26.0",
        "1.27.0",
        "fixed",
        DQ_INT8_RESHAPE,
        "dequantize_int8_reshape",
        "DequantizeLinear of int8 with no zero point, into a Reshape, at opset 21",
    ),
    Flip(
        "quantize_4bit_maxpool_opset26",
        ORT,
        "1.27.0",
        "1.28.0",
        "new_regression",
        _chain("QuantizeLinear", "DequantizeLinear", "MaxPool"),
        "quantize_4bit_maxpool",
        "QuantizeLinear to uint4 or int4, its DequantizeLinear, into a MaxPool, at opset 26",
    ),
    Flip(
        "layernorm_pattern_pow_zero_float16",
        ORT,
        "1.19.2",
        "1.20.1",
        "new_regression",
        _chain("Pow", "ReduceMean", "Add", "Sqrt", "Div", dtypes=("float16",)),
        "layernorm_pattern_pow_zero_float16",
        "LayerNorm~ at float16 with an exponent other than 2",
    ),
    Flip(
        "squeeze_as_scalar",
        ORT,
        "1.17.3",
        "1.18.0",
        "new_regression",
        _chain("Squeeze"),
        "squeeze_of_unknown_shape_then",
        "Squeeze without axes on a tensor of unknown shape, then any reader of its rank",
    ),
    Flip(
        "pad_wrap_fixed",
        ORT,
        "1.30.0",
        "1.31.1",
        "fixed",
        PAD_WRAP,
        "pad_wrap_longer_than_the_axis",
        "Pad, mode wrap, pads longer than the axis",
    ),
)


def pairs(half: str | None = None) -> dict[tuple[str, str, str], list[Flip]]:
    """The flips by (system, base, head): one campaign per pair serves every flip of it;
    `half`: only the flips of that half."""
    by: dict[tuple[str, str, str], list[Flip]] = {}
    for flip in FLIPS:
        if half is not None and flip.half != half:
            continue
        by.setdefault((flip.system, flip.base, flip.head), []).append(flip)
    return by
