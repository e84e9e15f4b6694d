"""Generated cases for tests of the plumbing around backends (workers, adapters, venvs).

They are drawn from float32 ops that every backend here implements, so a failure in
those tests is a failure of fuzzbot's plumbing, not a finding about a backend, and
they stay stable while the generator grows new ops and dtypes.
"""

from __future__ import annotations

import contextlib

from generator.api import GenConfig, GeneratedCase, generate
from generator.dtypes import DType
from generator.values import NoValidValues

STABLE_OPS = ["Add", "Mul", "Sub", "Relu", "Sigmoid", "Tanh", "MatMul", "Conv", "Transpose", "Reshape", "Concat"]


def stable_cases(count: int, start: int = 0, nodes: int = 5) -> list[GeneratedCase]:
    """`count` cases from consecutive seeds from `start`, skipping seeds without valid values.
    Shapes stay constants and no edge is aimed at: every backend must run these as they are
    (TVM's Relax frontend declines most runtime shapes)."""
    cfg = GenConfig(
        nodes=nodes, ops=STABLE_OPS, dtypes=[DType.float32], feedback=False, runtime_shapes=0, edges=0, wide_types=0
    )
    cases: list[GeneratedCase] = []
    seed = start
    while len(cases) < count:
        with contextlib.suppress(NoValidValues):
            cases.append(generate(seed, cfg))
        seed += 1
    return cases
