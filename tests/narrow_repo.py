"""A real git history of narrowcc (tests/narrowcompiler): a compiler that runs few ops, where
the most common PR of all, one that adds an op, and two pass regressions happen.

Main branch, oldest first:

    base      29 op types (narrowcc.support), one pass (drop_identity)
    head      adds Max and Min: what a PR that adds an op looks like
    softmax   passes: Softmax moved before the Transpose it reads (wrong: the axis is not
              carried through the permutation)
    leaky     passes: LeakyRelu folded into the Clip that reads it (wrong when the Clip has
              no lower bound)

`softmax` and `leaky` each introduce one regression in one pass file of their own, so the
diff from `head` names the ops each pass touches. Author and committer dates are fixed,
so the SHAs are the same on every run.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from bot.sides.config import CompilerConfig
from tests.toy_repo import Builder, ToyRepo, shared_repo

SOURCE = Path(__file__).resolve().parent / "narrowcompiler"
BACKEND = "narrowcc.fuzzbot:NarrowAdapter:O1"
ADDED_OPS = ("Max", "Min")

MAX_MIN = ('    "Where": ("bool",),\n', '    "Where": ("bool",),\n    "Max": FLOATS,\n    "Min": FLOATS,\n')
VERSION_1_1 = ('__version__ = "1.0"', '__version__ = "1.1"')

SOFTMAX_PASS = '''"""Softmax reading a Transpose (its only reader) runs before the Transpose instead, so the
Transpose ends up last, where a later pass can merge it with the next one."""

from __future__ import annotations

from collections import Counter

import onnx
from onnx import helper


def sink_softmax(graph: onnx.GraphProto) -> int:
    producers = {o: n for n in graph.node for o in n.output}
    readers = Counter(i for n in graph.node for i in n.input)
    outputs = {o.name for o in graph.output}
    moved = 0
    for softmax in list(graph.node):
        if softmax.op_type != "Softmax":
            continue
        transpose = producers.get(softmax.input[0])
        if transpose is None or transpose.op_type != "Transpose":
            continue
        if readers[transpose.output[0]] != 1 or transpose.output[0] in outputs:
            continue
        perm = [list(a.ints) for a in transpose.attribute if a.name == "perm"]
        if not perm:
            continue
        axis = next((a.i for a in softmax.attribute if a.name == "axis"), -1)
        rank = len(perm[0])
        inner = axis % rank
        transpose.op_type = "Softmax"
        del transpose.attribute[:]
        transpose.attribute.append(helper.make_attribute("axis", inner))
        softmax.op_type = "Transpose"
        del softmax.attribute[:]
        softmax.attribute.append(helper.make_attribute("perm", perm[0]))
        moved += 1
    return moved
'''

LEAKY_PASS = '''"""LeakyRelu whose only reader is a Clip with a lower bound of 0 or more: the Clip alone gives
the same values, as it lifts every negative LeakyRelu output to its bound."""

from __future__ import annotations

from collections import Counter

import onnx
from onnx import numpy_helper


def fold_leaky_clip(graph: onnx.GraphProto) -> int:
    producers = {o: n for n in graph.node for o in n.output}
    readers = Counter(i for n in graph.node for i in n.input)
    outputs = {o.name for o in graph.output}
    constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    folded = 0
    for clip in list(graph.node):
        if clip.op_type != "Clip":
            continue
        leaky = producers.get(clip.input[0])
        if leaky is None or leaky.op_type != "LeakyRelu":
            continue
        if readers[leaky.output[0]] != 1 or leaky.output[0] in outputs:
            continue
        low = clip.input[1] if len(clip.input) > 1 else ""
        if low and (low not in constants or float(constants[low]) < 0):
            continue
        clip.input[0] = leaky.input[0]
        graph.node.remove(leaky)
        folded += 1
    return folded
'''


def base_op_types() -> list[str]:
    """The op types narrowcc's first commit runs (its narrowcc.support), read from the source."""
    spec = importlib.util.spec_from_file_location("narrowcc_support", SOURCE / "narrowcc" / "support.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return sorted(module.SUPPORTED)


def _add_pass(b: Builder, module: str, function: str, text: str) -> None:
    (b.path / "narrowcc" / "passes" / f"{module}.py").write_text(text)
    b.edit(
        "narrowcc/passes/__init__.py",
        (
            "from .identity import drop_identity\n",
            f"from .identity import drop_identity\nfrom .{module} import {function}\n",
        ),
        ("PASSES: tuple[Pass, ...] = (drop_identity,", f"PASSES: tuple[Pass, ...] = (drop_identity, {function},"),
    )


def build_narrow_repo(path: Path) -> ToyRepo:
    """Create the history in `path` (an empty or missing folder)."""
    path.mkdir(parents=True, exist_ok=True)
    b = Builder(path, SOURCE)
    b.git("init", "-q", "-b", "main")
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    shutil.copytree(SOURCE, path, dirs_exist_ok=True, ignore=skip)
    shas = {"base": b.commit("narrowcc 1.0: 29 op types, onnxruntime kernels, drop_identity")}
    b.edit("narrowcc/support.py", MAX_MIN)
    b.edit("narrowcc/__init__.py", VERSION_1_1)
    shas["head"] = b.commit("support: Max and Min")
    _add_pass(b, "softmax_transpose", "sink_softmax", SOFTMAX_PASS)
    shas["softmax"] = b.commit("passes: run Softmax before the Transpose it reads")
    _add_pass(b, "leaky_clip", "fold_leaky_clip", LEAKY_PASS)
    shas["leaky"] = b.commit("passes: fold LeakyRelu into a Clip with a lower bound")
    for name, sha in shas.items():
        b.git("tag", name, sha)
    return ToyRepo(path, shas)


def shared_narrow_repo(root: Path) -> ToyRepo:
    """The history in `root`, built by the first caller; later callers read its SHAs back."""
    return shared_repo(root, build_narrow_repo)


def narrow_compiler_config(repo: ToyRepo, base: str = "base", head: str = "head") -> CompilerConfig:
    """numpy, onnx and onnxruntime installed once for every side; each commit installed
    without build isolation, so a commit builds in about a second."""
    return CompilerConfig(
        repo=str(repo.path),
        packages=["numpy==2.4.6", "onnx==1.23.2", "onnxruntime==1.31.1", "setuptools", "wheel"],
        build=["pip install --no-build-isolation --no-deps ."],
        base={"ref": repo.sha(base)},
        head={"ref": repo.sha(head)},
    )


def _model(
    nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], shape: list[int], out_shape: list[int]
) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, out_shape)
    graph = helper.make_graph(nodes, "narrow", [x], [out], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def softmax_case() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Transpose (perm 1,0) then Softmax over the last axis: wrong from `softmax` on."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
        helper.make_node("Softmax", ["t"], ["out"], axis=-1),
    ]
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    return _model(nodes, [], [2, 3], [3, 2]), {"x": x}


def leaky_case() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """LeakyRelu then a Clip with only an upper bound: wrong from `leaky` on."""
    top = helper.make_tensor("hi", TensorProto.FLOAT, [], [0.5])
    nodes = [
        helper.make_node("LeakyRelu", ["x"], ["t"], alpha=0.1),
        helper.make_node("Clip", ["t", "", "hi"], ["out"]),
    ]
    x = np.array([[-2.0, -0.5, 0.25, 1.0]], dtype=np.float32)
    return _model(nodes, [top], [1, 4], [1, 4]), {"x": x}
