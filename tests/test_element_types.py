"""int16, the element type a case draws only when it starts from it (generator.dtypes.WIDE):
its share, the cases it leaves alone, its probe, and its models on real onnxruntime and TVM."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest

from backends.client import WorkerClient
from backends.reference import run_reference
from backends.results import Status
from backends.spec import parse_backend
from bot.sides.probe import ProbeFailure, probe_support
from generator.api import GenConfig, GeneratedCase, generate
from generator.dtypes import WIDE, DType
from generator.start import wide_draw

INT16_OPS = ["Add", "Sub", "Mul", "Abs", "Neg", "Less", "Equal", "Concat", "Transpose", "Gather", "Slice", "Tile"]
"""Ops onnxruntime 1.31.1 runs at int16 on the CPU (its probe says so; Max not)."""


def _types(model: onnx.ModelProto) -> set[int]:
    inferred = onnx.shape_inference.infer_shapes(model)
    g = inferred.graph
    return {v.type.tensor_type.elem_type for v in [*g.input, *g.output, *g.value_info]} | {
        t.data_type for t in g.initializer
    }


def test_a_share_of_cases_starts_from_int16_and_no_other_case_changes() -> None:
    wide = [seed for seed in range(400) if wide_draw(seed, 0.1)]
    assert 20 <= len(wide) <= 60, len(wide)
    for seed in range(40):
        case = generate(seed, GenConfig(nodes=4))
        if seed in wide:
            assert onnx.TensorProto.INT16 in _types(case.model), seed
        else:
            assert onnx.TensorProto.INT16 not in _types(case.model), seed
            same = generate(seed, GenConfig(nodes=4, wide_types=0.0))
            assert same.model.SerializeToString() == case.model.SerializeToString(), seed
    assert all(
        onnx.TensorProto.INT16 not in _types(generate(s, GenConfig(nodes=4, wide_types=0.0)).model) for s in wide
    )


@pytest.fixture(scope="module")
def int16_cases() -> list[GeneratedCase]:
    cfg = GenConfig(nodes=4, ops=INT16_OPS, dtypes=[DType.int16], symbolic_dims=0.0)
    return [generate(seed, cfg) for seed in range(30)]


@pytest.fixture(scope="module")
def ort() -> Iterator[WorkerClient]:
    with WorkerClient(parse_backend("onnxruntime:all"), timeout_s=60) as client:
        yield client


def test_int16_models_are_valid_and_the_reference_agrees_with_onnxruntime_and_tvm(
    int16_cases: list[GeneratedCase], ort: WorkerClient
) -> None:
    compared = 0
    with WorkerClient(parse_backend("tvm:default"), timeout_s=120, compile_timeout_s=300) as tvm:
        for case in int16_cases:
            onnx.checker.check_model(case.model, full_check=True)
            assert onnx.TensorProto.INT16 in _types(case.model)
            expected = run_reference(case.model, case.inputs)
            for client in (ort, tvm):
                result = client.run(case.model.SerializeToString(), case.inputs)
                assert result.status is Status.ok, (client.spec, result.message)
                for name, want in expected.items():
                    got = result.outputs[name]
                    assert got.dtype == want.dtype and np.array_equal(got, want), (client.spec, name)
                compared += 1
    assert compared == 2 * len(int16_cases)


def test_the_probe_learns_which_ops_a_build_runs_at_int16(ort: WorkerClient, tmp_path: Path) -> None:
    failures: list[ProbeFailure] = []
    assert ort.info is not None
    matrix = probe_support(ort, ort.info, 17, tmp_path, failures.append, ops=["Add", "MatMul", "Max", "Neg"])
    assert DType.int16 in matrix.supported["Add"] and DType.int16 in matrix.supported["Neg"]
    assert "int16" in matrix.unsupported["Max"]  # its schema takes int16, this build's kernels do not
    assert "int16" not in matrix.unsupported.get("MatMul", {})  # its spec never takes int16: never asked
    assert DType.int32 in matrix.supported["MatMul"]  # the other types are probed as before
    assert not failures
    assert set(WIDE) == {DType.int16}
