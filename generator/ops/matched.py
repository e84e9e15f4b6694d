"""Constants that converters match by value, as data in one place.

A converter or a rewrite that turns Clip(x, 0, 6) into ReLU6, or HardSigmoid(1/6, 0.5) back
into torch's Hardsigmoid, branches on exact attribute or constant values, and a uniformly
drawn value never lands on them: onnx2torch's Clip converter once matched `min >= 0 and
max == 6` for ReLU6 and no generated model told it apart from `min == 0`, since no Clip
bound was ever exactly 6. So a share of the nodes of each op below take one of its matched
settings, and a share one of its near settings: values just off the matched ones (a bound of
6.5, a lower bound of 0.5 beside an upper of 6, alpha 0.17), where a matcher that is too
loose computes something else than the node says.

A setting maps an attribute name (or for a constant operand, its ONNX input name) to its
value, or to None for an optional operand left out. The specs read their op's entry through
`draw_matched`, from the insertion's own random stream, so the same seed draws the same
setting; an op without an entry draws nothing, and its models are what they were.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Setting = Mapping[str, float | None]

MATCHED_SHARE = 0.15
"""The share of a listed op's nodes that take one of its matched settings."""
NEAR_SHARE = 0.1
"""The share that take one of its near settings instead."""

SELU_ALPHA = 1.67326319217681884765625
SELU_GAMMA = 1.05070102214813232421875
"""Selu's defaults, as the schema (float32) and torch's nn.SELU have them."""


@dataclass(frozen=True)
class Matched:
    """One op's matched settings, the near ones, and who matches them."""

    exact: tuple[Setting, ...]
    near: tuple[Setting, ...]
    who: str


MATCHED: dict[str, Matched] = {
    "Clip": Matched(
        exact=({"min": 0.0, "max": 6.0}, {"min": 0.0, "max": None}),
        near=(
            {"min": 0.0, "max": 6.5},
            {"min": 0.5, "max": 6.0},
            {"min": 1.0, "max": 6.0},
            {"min": -0.5, "max": 6.0},
            {"min": 0.0, "max": 7.0},
        ),
        who="onnx2torch's Clip converter makes (0, 6) nn.ReLU6 and (0, none) nn.ReLU (torch.onnx writes"
        " nn.ReLU6 as Clip(0, 6), MobileNets are full of it); a Conv+Clip fusion may take (0, 6) as ReLU6",
    ),
    "HardSigmoid": Matched(
        exact=({"alpha": 1 / 6, "beta": 0.5},),
        near=({"alpha": 0.17, "beta": 0.5}, {"alpha": 1 / 6, "beta": 0.6}),
        who="torch.onnx writes nn.Hardsigmoid, and before opset 14 nn.Hardswish (x * HardSigmoid(x)), with"
        " alpha=1/6, beta=0.5: a converter mapping them back to torch's ops matches those values",
    ),
    "LeakyRelu": Matched(
        exact=({"alpha": 0.01},),
        near=({"alpha": 0.011},),
        who="0.01 is ONNX's and torch's default slope (nn.LeakyReLU()); onnx2torch falls back to it, and a"
        " converter may drop the attribute, or pick a default kernel, when it holds the default",
    ),
    "Elu": Matched(
        exact=({"alpha": 1.0},),
        near=({"alpha": 1.1},),
        who="1.0 is ONNX's and torch's default (nn.ELU()); a converter may pick a default kernel for it",
    ),
    "Celu": Matched(
        exact=({"alpha": 1.0},),
        near=({"alpha": 1.1},),
        who="1.0 is ONNX's and torch's default (nn.CELU()), where Celu is Elu",
    ),
    "Selu": Matched(
        exact=({"alpha": SELU_ALPHA, "gamma": SELU_GAMMA},),
        near=({"alpha": 1.6733, "gamma": SELU_GAMMA}, {"alpha": SELU_ALPHA, "gamma": 1.0508}),
        who="onnx2torch makes Selu nn.SELU, whose constants are fixed, and refuses other values"
        " (np.isclose to the defaults): only the defaults convert",
    ),
    "Pow": Matched(
        exact=({"Y": 2.0}, {"Y": 0.5}, {"Y": 3.0}),
        near=({"Y": 2.5}, {"Y": 0.45}),
        who="a scalar exponent of 2 or 3 takes onnxruntime's CPU Pow kernel's x*x and x*x*x path, and"
        " simplifiers rewrite x**2 as x*x and x**0.5 as sqrt(x); 2.5 truncates to 2",
    ),
}
"""Op -> its matched and near settings. Not here: Add and Sub of 0, Mul and Div by 1, which the
NeutralArith template writes (generator.patterns.shape) in exact and near-miss forms."""


def draw_matched(
    op_type: str, rng: random.Random, fits: Callable[[float], bool] = lambda v: True
) -> dict[str, float | None] | None:
    """One of the op's matched settings (MATCHED_SHARE of the time) or near ones (NEAR_SHARE),
    among those whose every value `fits` the node (an integer Clip takes whole bounds alone);
    None: the spec draws as usual. An op without an entry draws nothing from `rng`."""
    entry = MATCHED.get(op_type)
    if entry is None:
        return None
    u = rng.random()
    pool = entry.exact if u < MATCHED_SHARE else entry.near if u < MATCHED_SHARE + NEAR_SHARE else ()
    usable = [s for s in pool if all(v is None or fits(v) for v in s.values())]
    return dict(rng.choice(usable)) if usable else None


def settings(op_type: str) -> tuple[Setting, ...]:
    """Every matched and near setting of the op (none when it has no entry)."""
    entry = MATCHED.get(op_type)
    return (*entry.exact, *entry.near) if entry is not None else ()
