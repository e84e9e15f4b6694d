"""The system's own code coverage as feedback (backends.code_coverage, bot.campaign.code_feedback),
measured in a real worker on a real Python system: onnx's reference evaluator behind the
example plugin, whose every op is Python."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from backends.client import WorkerClient
from backends.results import RunResult, Status
from backends.spec import parse_backend
from bot.campaign.code_feedback import CodeFeedback
from bot.campaign.hint import git_changes, with_python_scopes
from tests.paths import ROOT
from tests.toy_repo import Builder

pytestmark = [pytest.mark.worker, pytest.mark.release]

PLUGIN = parse_backend(f"{ROOT / 'examples' / 'plugin_backend.py'}:OnnxReferenceAdapter")


def _model(op: str) -> tuple[bytes, dict[str, np.ndarray]]:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString(), {"x": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)}


def _count(result: RunResult) -> int:
    return sum(len(arcs) for arcs in result.arcs.values())


def _lines(result: RunResult, suffix: str) -> set[int]:
    return {
        line for name, arcs in result.arcs.items() if name.endswith(suffix) for arc in arcs for line in arc if line > 0
    }


def test_a_worker_reports_the_arcs_a_run_reached_first() -> None:
    with WorkerClient(PLUGIN, sys.executable, 30.0, coverage=["onnx.reference"]) as client:
        assert client.measures and client.handshake["coverage_modules"] == ["onnx.reference"]
        relu, inputs = _model("Relu")
        client.submit(relu, inputs, measure=True)
        first = client.collect()
        assert first.status is Status.ok and _lines(first, "onnx/reference/ops/op_relu.py")
        assert all(name.startswith("onnx/reference/") for name in first.arcs), "named from the package"
        client.submit(relu, inputs, measure=True)
        second = client.collect()  # the evaluator's own caches may take another branch once
        assert not _lines(second, "op_relu.py") and _count(second) * 5 < _count(first), "nothing new, or next to"
        client.submit(relu, inputs, measure="all")
        ran = _lines(client.collect(), "op_relu.py")  # the kernel's lines, not its module's import
        assert ran and ran < _lines(first, "op_relu.py"), "all: every arc this run executed"
        sigmoid, inputs = _model("Sigmoid")
        client.submit(sigmoid, inputs)
        assert client.collect().arcs == {}, "a run not asked to measure is not measured"
        client.submit(sigmoid, inputs, measure=True)
        again = client.collect()
        assert _lines(again, "op_sigmoid.py") and not _lines(again, "op_relu.py")


def test_a_worker_without_the_coverage_package_says_so_and_runs() -> None:
    from tests.venvs import cached_venv

    python = cached_venv("no-coverage", ["numpy==2.4.6", "onnx==1.23.2"])
    with WorkerClient(PLUGIN, str(python), 30.0, coverage=["onnx.reference"]) as client:
        assert not client.measures and "no `coverage` package" in client.handshake["coverage"]
        relu, inputs = _model("Relu")
        client.submit(relu, inputs, measure=True)
        result = client.collect()
        assert result.status is Status.ok and result.arcs == {}


def test_the_campaign_union_counts_the_changed_lines_a_case_reached_first() -> None:
    code = CodeFeedback.of({"onnx2torch/node_converters/pad.py": {10, 11, 30}}, every=1)
    pad = "onnx2torch/node_converters/pad.py"
    first = code.observe(RunResult(status=Status.ok, arcs={pad: [(-1, 10), (10, 12)], "onnx2torch/other.py": [(1, 2)]}))
    assert (first.arcs, first.lines, first.changed) == (3, 4, 1)
    again = code.observe(RunResult(status=Status.ok, arcs={pad: [(10, 12)]}))
    assert (again.arcs, again.changed) == (0, 0), "an arc the union has is no news from another worker"
    later = code.observe(RunResult(status=Status.ok, arcs={pad: [(12, 30), (30, 11)]}))
    assert later.changed == 2
    summary = code.summary()
    assert summary.changed_lines == 3 and summary.changed_lines_reached == 3 and summary.cases_reaching_change == 2
    assert summary.measured == 3


def test_a_diff_path_and_a_package_path_name_one_file() -> None:
    """A diff of installed sources names paths inside the package; the worker names them
    from the package: TVM's frontend is one file either way."""
    code = CodeFeedback.of({"relax/frontend/onnx/onnx_frontend.py": {5}}, every=1)
    reach = code.observe(RunResult(status=Status.ok, arcs={"tvm/relax/frontend/onnx/onnx_frontend.py": [(4, 5)]}))
    assert reach.changed == 1


def test_sampling_picks_seeds_by_the_seed_alone() -> None:
    code = CodeFeedback.of({}, every=4)
    picked = [s for s in range(400) if code.measures(s)]
    assert 60 <= len(picked) <= 140 and picked == [s for s in range(400) if CodeFeedback.of({}, 4).measures(s)]
    assert all(CodeFeedback.of({}, 1).measures(s) for s in range(50))


def _repo(tmp_path: Path) -> Builder:
    (tmp_path / "repo").mkdir()
    repo = Builder(tmp_path / "repo")
    repo.git("init", "-q")
    return repo


def test_a_git_diff_names_heads_changed_lines_and_the_class_around_them(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    source = "class OnnxHardSigmoid:\n    def forward(self, x):\n        return clip(x, 0.0, 1.0)\n\n\nX = 1\n"
    (repo.path / "act.py").write_text(source)
    base = repo.commit("base")
    (repo.path / "act.py").write_text(source.replace("0.0, 1.0", "1.0, 1.0").replace("X = 1", "X = 2\nY = 3"))
    head = repo.commit("head")
    changes = git_changes(str(repo.path), base, head)
    assert [c.new_lines for c in changes] == [{3, 6, 7}]
    scoped = with_python_scopes(changes, repo.path)
    assert "OnnxHardSigmoid" in scoped[0].scopes and "forward" in scoped[0].scopes


def test_a_deletion_names_the_line_after_it(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo.path / "m.py").write_text("a = 1\nb = 2\nc = 3\n")
    base = repo.commit("base")
    (repo.path / "m.py").write_text("a = 1\nc = 3\n")
    head = repo.commit("head")
    assert [c.new_lines for c in git_changes(str(repo.path), base, head)] == [{2}]


NATIVE_SOURCE = """
extern void __gcov_dump(void);
extern void __gcov_reset(void);
void fuzz_dump(void) { __gcov_dump(); }
void fuzz_reset(void) { __gcov_reset(); }
int sign_of(double x) {
    if (x > 0)
        return 1;
    if (x < 0)
        return -1;
    return 0;
}
"""

NATIVE_PLUGIN = '''
import ctypes, glob, json, os, subprocess
import numpy as np


class NativeAdapter:
    """A C kernel built with --coverage: its gcov counters, dumped and reset per run, read back
    with gcov's JSON (the recipe docs/campaigns.md gives for C and C++ builds)."""

    name = "native"
    levels = ("default",)
    default_level = "default"

    def __init__(self, options):
        self.lib = ctypes.CDLL(os.environ["FUZZBOT_NATIVE_LIB"])
        self.lib.sign_of.argtypes = [ctypes.c_double]
        self.objects = os.path.dirname(os.environ["FUZZBOT_NATIVE_LIB"])

    def info(self):
        return {"name": self.name, "version": "1", "commit": None}

    def compile(self, model, level):
        return None

    def run(self, compiled, inputs):
        x = inputs["x"]
        return {"y": np.array([self.lib.sign_of(float(v)) for v in x.flat], dtype=np.float32).reshape(x.shape)}

    def code_coverage(self):
        self.lib.fuzz_dump()
        lines = {}
        for data in glob.glob(os.path.join(self.objects, "*.gcda")):
            report = subprocess.run(
                ["gcov", "--json-format", "--stdout", data], cwd=self.objects, capture_output=True, text=True
            ).stdout
            for line in report.splitlines():
                for f in json.loads(line).get("files", []):
                    ran = [n["line_number"] for n in f["lines"] if n["count"] > 0]
                    lines[os.path.basename(f["file"])] = ran
            os.remove(data)
        self.lib.fuzz_reset()
        return lines
'''


def test_a_native_build_s_own_counters_are_read_per_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A C or C++ build opts in by compiling with --coverage and exporting two wrappers of
    gcov's hidden __gcov_dump and __gcov_reset; its plugin's `code_coverage()` reads the lines
    each run executed, which the worker sends like Python's arcs."""
    if shutil.which("gcc") is None or shutil.which("gcov") is None:
        pytest.skip("no gcc here")
    (tmp_path / "kernel.c").write_text(NATIVE_SOURCE)
    build = ["gcc", "-shared", "-fPIC", "-O0", "--coverage", "kernel.c", "-o", "libkernel.so"]
    subprocess.run(build, cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "native_plugin.py").write_text(NATIVE_PLUGIN)
    monkeypatch.setenv("FUZZBOT_NATIVE_LIB", str(tmp_path / "libkernel.so"))
    spec = parse_backend(f"{tmp_path / 'native_plugin.py'}:NativeAdapter")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    graph = helper.make_graph([helper.make_node("Sign", ["x"], ["y"])], "g", [x], [x])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    with WorkerClient(spec, sys.executable, 30.0, coverage=True) as client:
        assert client.measures and client.handshake["coverage"].startswith("on")
        client.submit(model, {"x": np.array([1.0, 2.0, 3.0], np.float32)}, measure=True)
        positive = client.collect()
        client.submit(model, {"x": np.array([-1.0, 0.0, -3.0], np.float32)}, measure=True)
        other = client.collect()
        client.submit(model, {"x": np.array([-1.0, 0.0, -3.0], np.float32)})
        unmeasured = client.collect()
    source = NATIVE_SOURCE.splitlines()
    ran = {source[line - 1].strip() for line in _lines(positive, "kernel.c")}
    assert "return 1;" in ran and "return -1;" not in ran, ran
    also = {source[line - 1].strip() for line in _lines(other, "kernel.c")}
    assert {"return -1;", "return 0;"} <= also and "return 1;" not in also, also
    assert unmeasured.arcs == {}
