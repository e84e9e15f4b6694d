"""The TVM adapter on another release than the main env's: apache-tvm 0.25 (which
needs apache-tvm-ffi 0.1.12 beside it) in a throwaway venv, at both levels."""

from __future__ import annotations

import pytest

from backends.client import WorkerClient
from backends.reference import run_reference
from backends.results import Status
from backends.spec import parse_backend
from oracles.verdict import Verdict, judge
from tests.cases import stable_cases
from tests.venvs import cached_venv

pytestmark = [pytest.mark.worker, pytest.mark.release]

TVM_025 = ["numpy==2.4.6", "onnx==1.23.2", "apache-tvm==0.25.0.post1", "apache-tvm-ffi==0.1.12"]


@pytest.mark.parametrize("level", ["O0", "default"])
def test_tvm_025_compiles_and_agrees_with_the_reference(level: str) -> None:
    python = cached_venv("tvm-0.25", TVM_025)
    with WorkerClient(parse_backend(f"tvm:{level}"), str(python), timeout_s=120) as client:
        assert client.info is not None and client.info.version.startswith("0.25")
        assert client.info.commit and client.info.level == level
        for case in stable_cases(2):
            result = client.run(case.model.SerializeToString(), case.inputs)
            assert result.status is Status.ok, result.message
            assert judge(result, run_reference(case.model, case.inputs), "stable ops").verdict is Verdict.pass_
