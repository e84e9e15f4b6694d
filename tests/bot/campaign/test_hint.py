"""The change as a hint (bot.campaign.hint): what a real git history's diff and two installed
packages' Python sources name, as op types."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from bot.campaign.hint import (
    Changed,
    ChangeHint,
    OpNames,
    git_changes,
    read_hint,
    source_changes,
    touched_ops,
    with_python_scopes,
    words,
)
from generator.ops import registry
from tests.narrow_repo import shared_narrow_repo

pytestmark = [pytest.mark.release]

OPS = sorted(registry())


def test_identifiers_are_split_into_words_and_spell_op_types() -> None:
    assert words("fold_leaky_clip") == ["fold", "leaky", "clip"]
    assert words("QLinearMatMul") == ["q", "linear", "mat", "mul"]
    names = OpNames(OPS)
    assert names.named("LeakyRelu") == {"LeakyRelu": 1.0}
    assert names.named("fold_leaky_clip") == {"Clip": 1.0, "LeakyRelu": 0.5}
    assert names.named("mat_mul_kernel") == {"MatMul": 1.0}
    assert names.named("max") == {} and names.named("Max") == {"Max": 1.0}  # code words are not ops
    assert "ReduceSum" not in names.named("reduce_all")  # `reduce` starts ten op types: none is meant


def test_a_converter_class_names_its_op_and_a_lone_common_word_names_none() -> None:
    """onnx2torch's Mean converter (`mean.py`, `class OnnxMean`, `-> torch.Tensor`) was read
    as MeanVarianceNormalization and TensorScatter: `mean` is a code word and was passed to
    the first-word rule, and `Tensor` alone was TensorScatter's first word."""
    names = OpNames(OPS)
    assert names.named("OnnxMean") == {"Mean": 1.0}  # spelled as the op inside the class name
    assert names.named("mean") == {} and names.named("Tensor") == {}
    assert names.named("mean_value") == {}  # a code word starts no op here either
    change = Changed(
        "onnx2torch/node_converters/mean.py",
        lines=["output = torch.zeros(broadcast_shape, dtype=tensors[1].dtype)"],
        scopes=["def apply_reduction(self, *tensors: torch.Tensor) -> torch.Tensor:", "OnnxMean"],
    )
    summary, _ = read_hint([change], OPS, "git")
    assert list(summary.ops) == ["Mean"], summary.ops


def test_a_git_diff_names_the_ops_of_the_passes_it_adds(tmp_path: Path) -> None:
    repo = shared_narrow_repo(tmp_path / "narrow")
    summary, layer = read_hint(git_changes(str(repo.path), repo.sha("head"), repo.sha("leaky")), OPS, "git")
    assert summary.files == 3
    assert {"Softmax", "Transpose", "Clip", "LeakyRelu"} <= set(summary.ops)
    assert "Transpose>Softmax" in layer.pairs and "LeakyRelu>Clip" in layer.pairs
    assert max(layer.ops.values()) == 1.0
    only_max_min, _ = read_hint(git_changes(str(repo.path), repo.sha("base"), repo.sha("head")), OPS, "git")
    assert set(only_max_min.ops) == {"Max", "Min"}


def test_installed_python_sources_name_the_converters_that_changed(tmp_path: Path) -> None:
    """Two copies of a frontend whose converter classes are named after ONNX ops, as TVM's
    Relax ONNX frontend is; one converter changes, one file is only reformatted nowhere."""
    frontend = textwrap.dedent(
        """\
        class OnnxOpConverter:
            pass


        class Gemm(OnnxOpConverter):
            @classmethod
            def _impl_v13(cls, bb, inputs, attr, params):
                return bb.emit(inputs[0])


        class Softplus(OnnxOpConverter):
            @classmethod
            def _impl_v1(cls, bb, inputs, attr, params):
                return inputs[0]
        """
    )
    for side in ("base", "head"):
        (tmp_path / side / "frontend").mkdir(parents=True)
        (tmp_path / side / "frontend" / "onnx_frontend.py").write_text(frontend)
        (tmp_path / side / "frontend" / "same.py").write_text("x = 1\n")
    head = tmp_path / "head" / "frontend" / "onnx_frontend.py"
    head.write_text(
        frontend.replace("return bb.emit(inputs[0])", "return bb.emit(inputs[0], transpose=attr['transA'])")
    )
    changes = source_changes(tmp_path / "base", tmp_path / "head")
    assert [c.path for c in changes] == ["frontend/onnx_frontend.py"]
    assert "Gemm" in changes[0].scopes and "Softplus" not in changes[0].scopes
    summary, _ = read_hint(changes, OPS, "sources")
    assert next(iter(summary.ops)) == "Gemm" and summary.ops["Gemm"] == 1.0
    assert summary.ops.get("Transpose", 0.0) <= 0.5  # only a keyword in a changed line


def test_a_diff_that_names_every_op_steers_nothing() -> None:
    """Twenty converters rewritten at once (TVM 0.26 to 0.27 rewrote 72): no op is pointed at."""
    ops = ["Gemm", "Softplus", "Tile", "Pad", "Slice", "Gather", "Expand", "Where", "Split", "Concat"]
    ops += ["Reshape", "Squeeze", "Unsqueeze", "Transpose", "Cast", "Neg", "Abs", "Log", "Exp", "Sigmoid"]
    changes = [Changed(f"frontend/{op.lower()}_converter.py", [], [op]) for op in ops]
    summary, layer = read_hint(changes, OPS, "sources")
    assert layer.empty and "too broad to steer by" in summary.note
    assert len(summary.ops) == 10  # shown all the same
    few, layer = read_hint(changes[:3], OPS, "sources")
    assert not layer.empty and set(few.ops) == {"Gemm", "Softplus", "Tile"}


FRONTEND = textwrap.dedent(
    """\
    def _shape_of(x):
        return list(x.shape)


    class Gemm:
        def convert(self, a, b):
            return a @ b


    class Softplus:
        def convert(self, x):
            return x


    CONVERTERS = {
        "Gemm": Gemm,
        "Softplus": Softplus,
    }
    """
)


def _commit(repo: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    env = ["-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), *env, "commit", "-q", "-m", "x"], check=True)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize(
    ("files", "touched"),
    [
        (  # a converter's body, and the README: that converter only
            {"frontend.py": FRONTEND.replace("return a @ b", "return b @ a"), "README.md": "Gemm and more\n"},
            {"Gemm"},
        ),
        (  # a new converter and its registry line
            {
                "frontend.py": FRONTEND.replace('"Softplus": Softplus,', '"Softplus": Softplus,\n    "Div": Div,')
                + "\n\nclass Div:\n    def convert(self, a, b):\n        return a / b\n"
            },
            {"Div"},
        ),
        ({"frontend.py": FRONTEND.replace("list(x.shape)", "tuple(x.shape)")}, None),  # a helper every op may call
        ({"setup.py": "version = 2\n"}, None),  # the build itself
        ({"kernels/gemm.cc": "int gemm() { return 2; }\n"}, {"Gemm"}),  # a file named for its op
        ({"docs/guide.md": "Softplus\n", "tests/test_frontend.py": "assert 1\n"}, set()),  # nothing built
    ],
    ids=["converter", "registered", "helper", "build-file", "op-file", "docs-and-tests"],
)
def test_the_ops_a_change_can_touch_are_read_off_every_hunk_or_not_at_all(
    tmp_path: Path, files: dict[str, str], touched: set[str] | None
) -> None:
    """Head's probe asks only about these ops and takes base's answers for the rest
    (bot.sides.probe.FromBase): a changed line that no op accounts for makes it ask everything."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    base = _commit(repo, {"frontend.py": FRONTEND, "setup.py": "version = 1\n", "kernels/gemm.cc": "int gemm();\n"})
    head = _commit(repo, files)
    changes = with_python_scopes(git_changes(str(repo), base, head), repo)
    assert touched_ops(changes, OpNames(OPS)) == (None if touched is None else frozenset(touched))
    hint = ChangeHint.of(changes, OPS, "git", whole=True)
    assert hint.touched == touched_ops(changes, OpNames(OPS))
    assert ChangeHint.of(changes, OPS, "installed sources").touched is None  # the Python part of a build only
