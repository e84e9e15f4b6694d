"""Two onnxruntime releases side by side, each in its own interpreter: the main env's
1.31.1 and 1.20.1 in a throwaway venv that holds only numpy and onnxruntime."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from backends.client import BackendUnavailable, WorkerClient
from backends.reference import run_reference
from backends.results import Status
from backends.spec import parse_backend
from bot.findings.bundle import write_bundle
from oracles.verdict import Verdict, judge
from tests.cases import stable_cases
from tests.conftest import CliResult
from tests.venvs import cached_venv

pytestmark = [pytest.mark.worker, pytest.mark.release]

OLD = "1.20.1"


@pytest.fixture(scope="module")
def old_python() -> Path:
    return cached_venv(f"onnxruntime-{OLD}", ["numpy==2.4.6", f"onnxruntime=={OLD}"])


def test_two_releases_run_the_same_cases_and_say_which_build_answered(old_python: Path) -> None:
    cases = stable_cases(3)
    spec = parse_backend("onnxruntime:all")
    with WorkerClient(spec, sys.executable) as new, WorkerClient(spec, str(old_python)) as old:
        assert new.info is not None and old.info is not None
        assert old.info.version == OLD and new.info.version != OLD
        assert old.info.commit and new.info.commit and old.info.commit != new.info.commit
        assert old.info.executable == str(old_python)
        for case in cases:
            expected = run_reference(case.model, case.inputs)
            for client in (new, old):
                result = client.run(case.model.SerializeToString(), case.inputs)
                assert result.status is Status.ok, result.message
                assert result.backend == client.info
                assert judge(result, expected, "stable ops").verdict is Verdict.pass_


def test_run_command_compares_the_releases(old_python: Path, cli: Callable[..., CliResult], tmp_path: Path) -> None:
    (case,) = stable_cases(1, start=7)
    write_bundle(tmp_path, case.model, case.inputs, run_reference(case.model, case.inputs))
    args = ["--backend", "onnxruntime:all", "--backend", "onnxruntime:disable"]
    r = cli("run", str(tmp_path), "--json", *args, "--python", sys.executable, "--python", str(old_python))
    assert r.code == 0, r.err
    rows = json.loads(r.out)["results"]
    assert [row["version"] == OLD for row in rows] == [False, True]
    assert rows[1]["python"] == str(old_python)


def test_an_env_without_the_backend_is_unavailable_in_one_line(old_python: Path) -> None:
    with pytest.raises(BackendUnavailable) as e:
        WorkerClient(parse_backend("openvino"), str(old_python)).start()
    assert "No module named 'openvino'" in str(e.value) and "\n" not in str(e.value)


def test_one_hot_casts_float_indices_from_onnxruntime_1_32_0_on(old_python: Path) -> None:
    """A campaign from 1.31.1 to 1.32.0 reported this as a new regression; the reference was
    what was wrong. The spec casts OneHot's float indices to int64 before use (0.8 is class 0):
    1.32.0 does, 1.20.1 and 1.31.1 match no class, as the reference used to."""
    node = helper.make_node("OneHot", ["x", "depth", "values"], ["y"])
    consts = [numpy_helper.from_array(np.asarray([15], np.int64), "depth")]
    consts.append(numpy_helper.from_array(np.asarray([-8, -5], np.int64), "values"))
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [1, 1, 15])],
        consts,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    inputs = {"x": np.asarray([[0.7983]], np.float16)}
    expected = run_reference(model, inputs)
    assert expected["y"].reshape(-1).tolist() == [-5] + [-8] * 14
    fixed = cached_venv("onnxruntime-1.32.0", ["numpy==2.4.6", "onnxruntime==1.32.0"])
    spec = parse_backend("onnxruntime:all")
    for python, verdict in ((str(fixed), Verdict.pass_), (sys.executable, Verdict.wrong_result)):
        with WorkerClient(spec, python) as client:
            result = client.run(model.SerializeToString(), inputs)
            assert judge(result, expected, "OneHot").verdict is verdict, (python, result.outputs)
    with WorkerClient(spec, str(old_python)) as client:
        result = client.run(model.SerializeToString(), inputs)
        assert judge(result, expected, "OneHot").verdict is Verdict.wrong_result
