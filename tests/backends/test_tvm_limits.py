"""TVM's declared limits, learned from TVM's own sources.

Every message the installed Relax ONNX frontend raises or asserts is read from its source
(ast, not a hand copy), and so are the legalizers' messages compiled into libtvm. A
message that says what TVM does not handle must be classified `unsupported` by the
adapter's patterns; one that says the model is invalid (an axis out of range, a shape
that cannot broadcast) or that the frontend itself went wrong must not be, because on a
valid generated model that is a bug. A new TVM release that adds a message fails here
until it is classified, instead of turning a declared limit into a crash report.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

from backends.adapters.base import is_unsupported
from backends.adapters.tvm import TvmAdapter

VALIDATION = re.compile(
    r"out of (?:bounds|range)|must be non-zero|must be unique|(?:must|to) be positive|to divide|expects? |[Ee]xpected "
    r"|to have the same dtype|accepts at most|only axes of size 1"
    r"|is expected to|invalid|mismatch|do not match|must match|must equal|must specify|must have exactly|must be >="
    r"|must be defined|Cannot broadcast (?!symbolic)|Cannot cast|Cannot compare|Cannot parse|unable to determine"
    r"|Missing outputs|deprecated|is required|Install it|no value in|cannot access an empty|should (?:share|be)"
    r"|hiden size|Shape dimension could not be inferred|name is required|divisor value 0|list indices"
    r"|requires pooled_shape|Unsupported (?:mode|approximate mode|Shift Direction)|Only one (?:of|type)"
    r"|must be a scalar|bias term must"
)
"""Wording of an invalid model or a frontend fault: never a declared limit."""


LIMIT = re.compile(r"[Uu]nsupported|not (?:yet |currently )?supported|[Nn]ot (?:yet )?implemented")
"""Wording of a limit in topi, whose other messages are mostly internal checks."""


def _tvm() -> Path:
    spec = importlib.util.find_spec("tvm")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("tvm is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _frontend() -> Path:
    return _tvm() / "relax" / "frontend" / "onnx" / "onnx_frontend.py"


def _text(node: ast.expr) -> str | None:
    """A message's literal text, with `{}` for what is formatted in at run time."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)  # type: ignore[misc]
    if isinstance(node, ast.BinOp):
        return (_text(node.left) or "") + (_text(node.right) or "")
    return None


def frontend_messages() -> list[str]:
    """`Type: message` of every raise and assert of the frontend, as the worker reports them."""
    return sorted(_messages(_frontend()))


def topi_limits() -> list[str]:
    """The limits topi's computes state (the frontend's ops are legalized into them), its
    testing helpers left out."""
    files = (f for f in (_tvm() / "topi").rglob("*.py") if "testing" not in f.parts)
    return sorted(m for f in files for m in _messages(f) if LIMIT.search(m))


def _messages(source: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            func = node.exc.func
            kind = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else "Error"
            text = _text(node.exc.args[0])
        elif isinstance(node, ast.Assert) and node.msg is not None:
            kind, text = "AssertionError", _text(node.msg)
        else:
            continue
        if text and kind != "ImportError":
            found.add(f"{kind}: {' '.join(text.replace('{}', 'x').split())}")
    return found


def library_messages() -> list[str]:
    """The legalizers' "only support ... for now" messages compiled into libtvm."""
    libs = sorted((_frontend().parents[3] / "lib").glob("libtvm*.so"))
    found: set[str] = set()
    for lib in libs:
        text = subprocess.run(["strings", str(lib)], capture_output=True, text=True, check=False).stdout
        found.update(line.strip() for line in text.splitlines() if re.search(r"only support \w+ and \w+ for now", line))
    return sorted(found)


def test_every_frontend_limit_is_declared_and_no_invalid_model_error_is() -> None:
    messages = frontend_messages()
    assert len(messages) > 100, "the frontend's messages were not found"
    limits = [m for m in messages if not VALIDATION.search(m)]
    misfiled = [m for m in limits if not is_unsupported(TvmAdapter.unsupported, m)]
    assert not misfiled, f"frontend limits the adapter calls bugs: {misfiled}"
    hidden = [m for m in messages if VALIDATION.search(m) and is_unsupported(TvmAdapter.unsupported, m)]
    assert not hidden, f"invalid-model errors the adapter would hide: {hidden}"
    assert len(limits) >= 60


def test_every_limit_topi_states_is_declared() -> None:
    limits = topi_limits()
    assert any("coordinate_transformation_mode" in m for m in limits), "topi's Resize limit was not found"
    misfiled = [m for m in limits if not VALIDATION.search(m) and not is_unsupported(TvmAdapter.unsupported, m)]
    assert not misfiled, f"topi limits the adapter calls bugs: {misfiled}"


@pytest.mark.parametrize(
    "message",
    [
        "ValueError: TopK sorted must be 1 for Relax frontend",
        "ValueError: Unsupported coordinate_transformation_mode: half_pixel_symmetric",
        "AssertionError: Only constant depth currently supported.",
        "TVMError: layer_norm: only support float32 and float16 for now",
    ],
)
def test_the_limits_a_real_campaign_met_are_declared(message: str) -> None:
    assert is_unsupported(TvmAdapter.unsupported, message)


def test_the_legalizers_limits_in_the_library_are_declared() -> None:
    found = library_messages()
    if not found:
        pytest.skip("no libtvm with legalizer messages here")
    assert all(is_unsupported(TvmAdapter.unsupported, f"TVMError: {m}") for m in found), found
