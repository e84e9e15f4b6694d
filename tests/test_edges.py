"""Edge-input cases (generator.edges): aimed at what compilers mishandle, seeded, and
judged as the oracles judge undefined inputs (values never compared)."""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path

import numpy as np

from generator.api import GenConfig, generate
from generator.coverage import Coverage
from generator.dtypes import DType
from generator.edges import KINDS, UNDEFINED, aim, edge_kind
from oracles.undefined import undefined_inputs
from tests.conftest import CliResult


def _cases(count: int, share: float = 1.0) -> list:  # type: ignore[type-arg]
    cfg = GenConfig(edges=share)
    return [generate(s, cfg) for s in range(count)]


def test_the_share_and_the_kind_are_functions_of_the_seed() -> None:
    kinds = collections.Counter(edge_kind(s, 0.05) for s in range(4000))
    assert 0.03 < 1 - kinds[None] / 4000 < 0.07
    assert set(kinds) == {None, *KINDS}
    assert [edge_kind(s, 0.05) for s in range(200)] == [edge_kind(s, 0.05) for s in range(200)]
    assert all(edge_kind(s, 0.0) is None for s in range(200))


def test_undefined_edges_are_set_on_graph_inputs_and_the_oracle_sees_them() -> None:
    cases = [c for c in _cases(60) if c.edge in UNDEFINED]
    kinds = {c.edge for c in cases}
    assert len(cases) >= 20 and kinds == set(UNDEFINED), kinds
    for case in cases:
        assert undefined_inputs(case.model, case.inputs), f"seed {case.seed}: {case.edge} left nothing undefined"


def test_unit_dims_cases_have_size_one_dims_and_stay_defined() -> None:
    cases = [c for c in _cases(80) if c.edge == "unit_dims"]
    assert cases
    dims = [d.dim_value for c in cases for i in c.model.graph.input for d in i.type.tensor_type.shape.dim]
    assert dims.count(1) / len(dims) > 0.3
    assert not any(undefined_inputs(c.model, c.inputs) for c in cases)


def test_a_case_is_the_same_with_edges_whatever_else_ran() -> None:
    first = _cases(30, 0.3)
    again = _cases(30, 0.3)
    for a, b in zip(first, again, strict=True):
        assert a.edge == b.edge and a.model.SerializeToString() == b.model.SerializeToString()
        assert all(np.array_equal(a.inputs[k], b.inputs[k]) for k in a.inputs)
    cov = Coverage()
    for s in range(300):
        generate(s, GenConfig(), coverage=cov)
    assert sum(cov.edges.values()) >= 5 and cov.stats().edges == dict(sorted(cov.edges.items()))


def test_an_edge_never_touches_the_shapes_and_axes_that_keep_the_model_valid() -> None:
    """A campaign once died on an int64 overflow aimed at a ReduceSum's axes input."""
    aimed = 0
    for seed in range(80):
        case = generate(seed, GenConfig(edges=0.0, runtime_shapes=1.0, dtypes=[DType.int32, DType.int64]))
        for kind in UNDEFINED:
            found = aim(kind, case.model, case.inputs, seed)
            if found is None:
                continue
            aimed += 1
            changed = {k for k in case.inputs if not np.array_equal(case.inputs[k], found[1][k])}
            assert changed and not any(k.startswith("r") for k in changed), (seed, kind, changed)
    assert aimed >= 10


def test_fuzzbot_gen_writes_an_edge_case_the_torch_reference_refuses(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    """`fuzzbot gen` once died on a zero divisor: torch raises on integer division by zero."""
    seed = next(s for s in range(2000) if generate(s, GenConfig()).edge == "zero_divisor")
    r = cli("gen", "--seed", str(seed), "--count", "1", "--out", str(tmp_path))
    assert r.code == 0, r.err
    bundle = tmp_path / f"seed-{seed}"
    assert (bundle / "model.onnx").is_file() and (bundle / "inputs.npz").is_file()


def test_an_undefined_edge_stays_on_a_graph_input_whatever_grows_after_it() -> None:
    """The target's input is kept from backward insertion, proposals included."""
    cases = [c for c in _cases(120) if c.edge in ("zero_divisor", "cast_out_of_range")]
    assert cases
    for case in cases:
        reads = {i for n in case.model.graph.node if n.op_type in ("Div", "Mod", "Cast") for i in n.input}
        assert reads & set(case.inputs), case.seed
