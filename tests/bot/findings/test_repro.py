"""Repro scripts as auto-close runs them: in a fresh venv that holds numpy and the compiler
under test and nothing else (no onnx, no fuzzbot), from a scratch folder, with real
onnxruntime releases that are right or wrong on a real case (tests/release_cases.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from backends.results import BackendInfo
from backends.spec import BackendSpec, parse_backend
from bot.findings.bundle import Finding
from bot.findings.repro import render_repro
from oracles.verdict import Verdict
from tests import release_cases as rc
from tests.paths import ROOT
from tests.venvs import cached_venv

pytestmark = [pytest.mark.worker, pytest.mark.release]

PLUGIN = ROOT / "examples" / "plugin_backend.py"
NUMPY = "numpy==2.4.6"


def _expected(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    names = [o.name for o in model.graph.output]
    return {n: np.asarray(v) for n, v in zip(names, ReferenceEvaluator(model).run(None, inputs), strict=True)}


def _finding(verdict: Verdict, name: str = "onnxruntime", version: str = "1.27.0", message: str = "") -> Finding:
    info = BackendInfo(name=name, level="all", version=version, commit="2a20b615a6")
    return Finding(verdict=verdict, message=message, backend=info)


def _run(python: Path, script: str, where: Path, **env: str) -> tuple[int, list[str]]:
    """As auto-close runs it: a scratch folder, and nothing of the project on the path."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "repro.py").write_text(script)
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(python), "repro.py"], cwd=where, env={**clean, **env}, capture_output=True, text=True, timeout=300
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.returncode, done.stdout.splitlines()


def _lacks(python: Path, *modules: str) -> None:
    """The venv really is without these, so a pass proves the repro does not need them."""
    for module in modules:
        probe = subprocess.run([str(python), "-c", f"import {module}"], cwd="/", capture_output=True, timeout=60)
        assert probe.returncode != 0, f"{python} has {module}"


def test_ort_wrong_result_repro_needs_only_numpy_and_onnxruntime(tmp_path: Path) -> None:
    model, inputs = rc.rms_norm_vector_epsilon()
    right, wrong = rc.REGRESSION
    spec = parse_backend("onnxruntime:all")
    script = render_repro(model, inputs, _expected(model, inputs), spec, "rms", finding=_finding(Verdict.wrong_result))
    assert script.splitlines()[3] == "# Install: pip install numpy onnxruntime==1.27.0"
    for version, code, word in ((wrong, 1, "BUG:"), (right, 0, "OK:")):
        python = rc.ort_python(version)
        _lacks(python, "onnx", "backends", "bot")
        rc_, out = _run(python, script, tmp_path / version)
        assert rc_ == code and len(out) == 1 and out[0].startswith(word), (version, out)
    assert "max abs error 0.864" in _run(rc.ort_python(wrong), script, tmp_path / "again")[1][0]


def test_missing_backend_package_is_cannot_tell_not_a_bug(tmp_path: Path) -> None:
    model, inputs = rc.rms_norm_vector_epsilon()
    script = render_repro(model, inputs, _expected(model, inputs), parse_backend("onnxruntime:all"), "rms")
    python = cached_venv("numpy-only", [NUMPY])
    code, out = _run(python, script, tmp_path)
    assert code == 3 and len(out) == 1, out
    assert out[0].startswith("CANNOT TELL: cannot import the backend") and "onnxruntime" in out[0]


def test_an_exception_reproduces_a_crash_and_is_cannot_tell_for_a_wrong_result(tmp_path: Path) -> None:
    """layernorm_single_element_axis: 1.21.1 raises at run time, 1.20.1 is right."""
    model, inputs = rc.layernorm_single_element_axis()
    right, raises = rc.REGRESSION_RAISES
    spec, expected = parse_backend("onnxruntime:all"), _expected(model, inputs)
    crash = render_repro(model, inputs, expected, spec, "ln", finding=_finding(Verdict.crash, version=raises))
    wrong = render_repro(model, inputs, expected, spec, "ln", finding=_finding(Verdict.wrong_result, version=raises))
    code, out = _run(rc.ort_python(raises), crash, tmp_path / "crash")
    assert code == 1 and out[0].startswith("BUG: the backend raises") and "must be larger than 1" in out[0]
    code, out = _run(rc.ort_python(raises), wrong, tmp_path / "wrong")
    assert code == 3 and out[0].startswith("CANNOT TELL: the backend raises, which is not the wrong_result"), out
    assert _run(rc.ort_python(right), crash, tmp_path / "fixed")[0] == 0


def test_a_model_the_build_cannot_load_is_cannot_tell(tmp_path: Path) -> None:
    """An opset newer than the release knows: not a bug, and not fixed either, even for a crash."""
    node = helper.make_node("Relu", ["x"], ["y"])
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in "xy")
    model = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 30)])
    model.ir_version = 10
    inputs = {"x": np.array([-1.0, 2.0], np.float32)}
    expected = {"y": np.array([0.0, 2.0], np.float32)}
    script = render_repro(
        model, inputs, expected, parse_backend("onnxruntime:all"), "new", finding=_finding(Verdict.crash)
    )
    code, out = _run(rc.ort_python("1.31.1"), script, tmp_path)
    assert code == 3 and out[0].startswith("CANNOT TELL: this build cannot load the model's format"), out
    assert "Opset 30 is under development" in out[0]


def _plugin_repro(spec: BackendSpec, perturbed: bool) -> str:
    (case_model, inputs) = rc.rms_norm_vector_epsilon()
    expected = _expected(case_model, inputs)
    if perturbed:  # the planted wrong result: the reference itself says otherwise
        expected = {k: v + 1 for k, v in expected.items()}
    info = BackendInfo(name="onnx-reference", level="default", version="1.23.2", commit="abc1234")
    finding = Finding(verdict=Verdict.wrong_result, backend=info)
    return render_repro(case_model, inputs, expected, spec, "plugin", finding=finding)


def test_plugin_file_repro_runs_without_fuzzbot(tmp_path: Path) -> None:
    """examples/plugin_backend.py subclasses fuzzbot's Adapter and needs onnx: its source and
    a stand-in for fuzzbot's adapter base travel inside the script."""
    python = cached_venv("onnx-1.23.2", [NUMPY, "onnx==1.23.2"])
    _lacks(python, "backends", "bot", "onnxruntime")
    plugin = tmp_path / "wrong_plugin.py"
    plugin.write_text(PLUGIN.read_text().replace("np.asarray(v) for n, v", "np.asarray(v) * 2 for n, v"))
    spec = parse_backend(f"{plugin}:OnnxReferenceAdapter")
    script = _plugin_repro(spec, perturbed=False)
    assert "the compiler under test (onnx-reference 1.23.2 at commit abc1234)" in script
    plugin.unlink()  # the script carries the plugin: the file is not needed any more
    code, out = _run(python, script, tmp_path / "planted")
    assert code == 1 and out[0].startswith("BUG: y:"), out
    right = _plugin_repro(parse_backend(f"{PLUGIN}:OnnxReferenceAdapter:checked"), perturbed=False)
    assert _run(python, right, tmp_path / "right") == (0, ["OK: outputs match the reference"])


def test_module_plugin_repro_imports_the_adapter_from_the_compilers_package(tmp_path: Path) -> None:
    python = cached_venv("onnx-1.23.2", [NUMPY, "onnx==1.23.2"])
    package = tmp_path / "site" / "mycompiler"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "fuzz.py").write_text(PLUGIN.read_text())
    script = _plugin_repro(parse_backend("mycompiler.fuzz:OnnxReferenceAdapter"), perturbed=True)
    code, out = _run(python, script, tmp_path / "run", PYTHONPATH=str(tmp_path / "site"))
    assert code == 1 and out[0].startswith("BUG: y:"), out
    code, out = _run(python, script, tmp_path / "bare")  # the compiler's package is not installed
    assert code == 3 and out[0].startswith("CANNOT TELL: the adapter cannot start here"), out


SEGV_PLUGIN = """
import os
import signal

from backends.adapters.base import Adapter


class Segv(Adapter):
    name = "segv"
    levels = ("default",)
    default_level = "default"

    def info(self):
        return {"name": self.name, "version": "0", "commit": None}

    def compile(self, model, level):
        return model

    def run(self, compiled, inputs):
        os.kill(os.getpid(), signal.SIGSEGV)
"""


def test_a_crash_that_kills_the_process_is_reported_not_just_an_exit_by_signal(tmp_path: Path) -> None:
    (tmp_path / "segv_plugin.py").write_text(SEGV_PLUGIN)
    spec = parse_backend(f"{tmp_path / 'segv_plugin.py'}:Segv")
    model, inputs = rc.rms_norm_vector_epsilon()
    info = BackendInfo(name="segv", level="default", version="0")
    python = cached_venv("numpy-only", [NUMPY])
    for verdict, code, line in (
        (Verdict.crash, 1, "BUG: the backend killed the process with SIGSEGV"),
        (
            Verdict.wrong_result,
            3,
            "CANNOT TELL: the backend killed the process with SIGSEGV, which is not the wrong_result",
        ),
    ):
        script = render_repro(
            model, inputs, _expected(model, inputs), spec, "segv", finding=Finding(verdict=verdict, backend=info)
        )
        got, out = _run(python, script, tmp_path / verdict.value)
        assert got == code and len(out) == 1 and out[0].startswith(line), out


def test_large_inputs_fit_thanks_to_compression(tmp_path: Path) -> None:
    """512 KiB of arrays (a mostly-zero tensor, as reductions leave them) in a repro well
    under the limit; base64 text of the raw bytes alone would be 700 KB."""
    x = np.zeros((32, 64, 32), np.float32)
    x[3, 40, 7], x[30, 2, 31] = -2.5, 4.25
    node = helper.make_node("Relu", ["x"], ["y"])
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(x.shape)) for n in "xy"]
    model = helper.make_model(
        helper.make_graph([node], "g", vi[:1], vi[1:]), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    script = render_repro(model, {"x": x}, {"y": np.maximum(x, 0)}, parse_backend("onnxruntime:all"), "big")
    assert len(script) < 9_000  # the script itself is about 8,000 characters
    assert _run(Path(sys.executable), script, tmp_path) == (0, ["OK: outputs match the reference"])


@pytest.mark.parametrize("backend", ["tvm:O0", "openvino:accuracy"])
def test_builtin_repros_name_their_packages_and_pass_on_a_right_build(backend: str, tmp_path: Path) -> None:
    model, inputs = rc.rms_norm_vector_epsilon()
    spec = parse_backend(backend)
    info = BackendInfo(name=spec.name, level=spec.level, version="9.9.9+local")
    finding = Finding(verdict=Verdict.wrong_result, backend=info)
    script = render_repro(model, inputs, _expected(model, inputs), spec, "x", finding=finding)
    pinned = script.splitlines()[3]
    package = {"tvm": "apache-tvm==9.9.9", "openvino": "openvino==9.9.9"}[spec.name]
    assert package in pinned
    assert (" onnx " in pinned) == (spec.name == "tvm")  # TVM's frontend reads it with onnx
    assert _run(Path(sys.executable), script, tmp_path) == (0, ["OK: outputs match the reference"])
