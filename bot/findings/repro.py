"""Standalone repro scripts.

A repro is posted in issues and re-run by auto-close in head's environment, which holds
numpy and the compiler under test and nothing of fuzzbot (often not even onnx). So the
script carries the model's own bytes and the arrays, zlib-compressed and base64-encoded,
and hands the bytes to the backend as they are: nothing rebuilds the model. A plugin
adapter comes along too (a `FILE.py` plugin's source inlined; a `module:Class` plugin
imported from the compiler's package), over a copy of fuzzbot's adapter base registered
as `backends.adapters.base`, so a plugin that subclasses fuzzbot's Adapter runs without
fuzzbot.

Exit status: 0 not reproduced, 1 reproduced, 3 cannot tell (see `_EXITS`): a missing
package or a model this build cannot load must never read as "the bug is still there",
nor as "fixed".
"""

from __future__ import annotations

import ast
import base64
import re
import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx

from backends.adapters import base
from backends.adapters.rewrites import node_names, wire_op_counts
from backends.results import BackendInfo
from backends.spec import BackendSpec, adapter_class
from bot.findings.bundle import Finding
from oracles.tolerances import Tolerance, tolerance_for

TEXT_LINES, TEXT_CHARS = 40, 2_500
"""The ONNX text form goes in as a comment only up to this size: it is for reading."""

CANNOT_LOAD = (
    r"[Uu]nsupported model IR version",
    r"IR version \d+ (?:is )?(?:not supported|unsupported)",
    r"[Oo]pset \d+ is under development",
    r"[Uu]nsupported opset",
    r"is not a registered function/op",
    r"No Op registered for \S+ with domain_version of",
)
"""How a build says the model's format is newer than it knows (IR version, opset, an op it
has no schema for): the model cannot be judged there, which is not a bug."""

_EXITS = """\
# Exit status, with one line on stdout saying which and why:
#   0  "OK: ..."           not reproduced: the backend ran and its outputs match the reference,
#                          or, on an input ONNX leaves undefined, it refused the input with an error
#   1  "BUG: ..."          reproduced: {bug}
#   3  "CANNOT TELL: ..."  a package is missing or cannot be imported, the backend cannot run
#                          here, it declines the model as unsupported or cannot load its
#                          format (IR version, opset){other}
# The backend runs in a child process, so a crash that kills it (SIGSEGV) is reported too.
"""

_PRELUDE = '''\
import base64
import os
import pickle
import re
import signal
import sys
import tempfile
import zlib

try:
    import numpy as np
except ImportError as e:
    print(f"CANNOT TELL: numpy is missing ({e}); see the install line at the top")
    sys.exit(3)


class CannotTell(Exception):
    """The backend could not be asked: neither a pass nor a reproduction."""


class Unavailable(RuntimeError):
    """The backend cannot run here at all (no device, no package)."""


def unpack(table, blob):
    data = zlib.decompress(base64.b64decode(blob))
    arrays, pos = {"inputs": {}, "expected": {}}, 0
    for role, name, dtype, shape in table:
        size = np.dtype(dtype).itemsize * int(np.prod(shape, dtype=np.int64))
        arrays[role][name] = np.frombuffer(data[pos : pos + size], dtype=np.dtype(dtype)).reshape(shape).copy()
        pos += size
    return arrays["inputs"], arrays["expected"]


'''

_STAND_IN_LOADER = '''\
def install_fuzzbot_base():
    """A plugin may subclass fuzzbot's Adapter: the same code (FUZZBOT_BASE) stands in as
    `backends.adapters.base`, so no fuzzbot is needed, and none is ever imported."""
    import types

    backends, adapters = types.ModuleType("backends"), types.ModuleType("backends.adapters")
    stand_in = types.ModuleType("backends.adapters.base")
    backends.__path__, adapters.__path__ = [], []
    backends.adapters, adapters.base = adapters, stand_in
    sys.modules.update({"backends": backends, "backends.adapters": adapters, "backends.adapters.base": stand_in})
    exec(compile(FUZZBOT_BASE, "<fuzzbot backends/adapters/base.py>", "exec"), stand_in.__dict__)


'''

_PLUGIN_RUN = '''\
def run(model_bytes, inputs):
    """As fuzzbot's worker drives the adapter: convert, compile, warmup, run."""
    try:
        install_fuzzbot_base()
        Adapter = load_adapter()
        adapter = Adapter(OPTIONS)
    except Exception as e:
        raise CannotTell(f"the adapter cannot start here: {type(e).__name__}: {e}") from e
    UNSUPPORTED.extend(getattr(Adapter, "unsupported", ()))
    model = adapter.convert(model_bytes) if hasattr(adapter, "convert") else model_bytes
    compiled = adapter.compile(model, LEVEL or Adapter.default_level)
    if hasattr(adapter, "warmup"):
        adapter.warmup(compiled, inputs)
    return adapter.run(compiled, inputs)

'''

_TAIL = '''
INPUTS, EXPECTED = unpack(ARRAYS, DATA)


def mismatches(name, want, got):
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{name}: expected {want.dtype}{list(want.shape)}, got {got.dtype}{list(got.shape)}"
    if want.dtype.kind not in "fc":
        bad = int((want != got).sum())
        return f"{name}: {bad} elements differ" if bad else None
    if not np.array_equal(np.isnan(want), np.isnan(got)) or not np.array_equal(np.isinf(want), np.isinf(got)):
        return f"{name}: NaN/Inf positions differ"
    atol, rtol = TOLERANCES[name]
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    bad = np.nan_to_num((err > atol) & (err > rtol * np.abs(want.astype(np.float64))))
    if bad.any():
        worst = np.nanmax(err)
        return f"{name}: {int(bad.sum())} elements beyond atol={atol} rtol={rtol}, max abs error {worst:.3g}"
    return None


def failed(e):
    """(exit status, line) for an exception from the backend: only the finding's own symptom is the bug."""
    text = f"{type(e).__name__}: {e}"
    line = " ".join(text.split())[:500]
    if isinstance(e, CannotTell):
        return 3, f"CANNOT TELL: {e}"
    if isinstance(e, ImportError):
        return 3, f"CANNOT TELL: cannot import the backend ({line}); see the install line at the top"
    if type(e).__name__ == "Unavailable":
        return 3, f"CANNOT TELL: the backend cannot run here ({line})"
    if any(re.search(p, text) for p in CANNOT_LOAD):  # first: the adapter declares these unsupported too
        return 3, f"CANNOT TELL: this build cannot load the model's format ({line})"
    if any(re.search(p, text) for p in UNSUPPORTED) and not optimizer_made(text):
        return 3, f"CANNOT TELL: the backend declines the model as unsupported ({line})"
    if UNDEFINED:
        return 0, f"OK: the backend refuses an input ONNX leaves undefined ({UNDEFINED}), an answer: {line}"
    return crashed("raises", line)


def optimizer_made(text):
    """Whether a refusal names a node the model does not have, of an op it does not have:
    one the build's optimizer made, whose missing kernel is its bug, not a declared limit."""
    found = re.search(REFUSED_NODE, text) if REFUSED_NODE else None
    return found is not None and found["node"] not in OWN_NODES and found["op"] not in OWN_OPS


def crashed(what, detail=""):
    detail = f": {detail}" if detail else ""
    if VERDICT == "crash":
        return 1, f"BUG: the backend {what}{detail}"
    return 3, f"CANNOT TELL: the backend {what}, which is not the {VERDICT} this repro checks{detail}"


def ask_backend():
    """("outputs", arrays) or ("outcome", (exit status, line))."""
    try:
        got = run(zlib.decompress(base64.b64decode(MODEL)), dict(INPUTS))
        return "outputs", {name: np.asarray(value) for name, value in got.items()}
    except Exception as e:
        return "outcome", failed(e)


def call_backend():
    """In a forked child where there is fork: a crash that kills the process (SIGSEGV, an
    abort) then comes back as an outcome, as an exception does."""
    if not hasattr(os, "fork"):
        return ask_backend()
    with tempfile.TemporaryFile() as box:
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            status = 70
            try:
                pickle.dump(ask_backend(), box)
                box.flush()
                status = 0
            finally:
                os._exit(status)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            return "outcome", crashed(f"killed the process with {signal.Signals(os.WTERMSIG(status)).name}")
        box.seek(0)
        if os.WEXITSTATUS(status) or not box.read(1):
            return "outcome", crashed(f"ended the process with exit status {os.WEXITSTATUS(status)}")
        box.seek(0)
        return pickle.load(box)


def main():
    kind, answer = call_backend()
    if kind == "outcome":
        print(answer[1])
        return answer[0]
    found = [mismatches(name, want, answer.get(name, np.array([]))) for name, want in EXPECTED.items()]
    problems = [m for m in found if m]
    for p in problems:
        print("BUG:", p)
    if not problems:
        print("OK: outputs match the reference" if EXPECTED else "OK: the backend runs the model without error")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
'''
"""The fixed end of every repro: decode, run, compare with the reference, one line and an exit status."""


def render_repro(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    expected: dict[str, np.ndarray],
    spec: BackendSpec,
    title: str,
    bounds: Mapping[str, Tolerance] | None = None,
    finding: Finding | None = None,
) -> str:
    """`bounds`: the per-output tolerances the oracle judged with (default: by dtype).
    `finding`: the build (its version goes into the install line) and the verdict (an
    exception reproduces a crash, and is "cannot tell" for a wrong result); without one, a
    repro with expected outputs checks a wrong result and one without checks a crash."""
    verdict = finding.verdict.value if finding else ("wrong_result" if expected else "crash")
    info = finding.backend if finding else None
    tols = {name: (bounds or {}).get(name) or tolerance_for(a.dtype) for name, a in expected.items()}
    cannot_load = [p for p in CANNOT_LOAD if not (finding and re.search(p, finding.message))]
    parts = [
        _header(spec, info, title, verdict),
        _PRELUDE,
        _model_text(model),
        f"VERDICT = {verdict!r}\n",
        f"UNDEFINED = {(finding.undefined if finding else '')!r}\n",
        f"UNSUPPORTED = {_patterns_literal(_patterns(spec))}\n",
        f"REFUSED_NODE = {_refused_node(spec)!r}\n",
        f"OWN_NODES = {sorted(node_names(model.SerializeToString()))!r}\n",
        f"OWN_OPS = {sorted({k.rsplit('::', 1)[-1] for k in wire_op_counts(model.SerializeToString())})!r}\n",
        f"CANNOT_LOAD = {_patterns_literal(cannot_load)}\n",
        f"MODEL = {_blob(model.SerializeToString())}\n",
        f"ARRAYS = [  # role, name, dtype, shape: in this order in DATA\n{_table(inputs, expected)}]\n",
        f"DATA = {_blob(_concat([*inputs.values(), *expected.values()]))}\n",
        "TOLERANCES = {\n" + "".join(f"    {k!r}: ({t.atol!r}, {t.rtol!r}),\n" for k, t in tols.items()) + "}\n\n\n",
        _backend_code(spec, info),
        _TAIL,
    ]
    return "".join(parts)


def _header(spec: BackendSpec, info: BackendInfo | None, title: str, verdict: str) -> str:
    line = " ".join(title.split()).replace(spec.name, _shown(spec))
    found = f"; found on {_build(info)}" if info else ""
    if verdict == "crash":
        bug, other = "the backend raises or crashes (or its outputs differ from the reference)", ""
    else:
        bug = "the outputs differ from the reference"
        other = f",\n#{' ' * 26}or it raises or crashes, which is not the {verdict} checked here"
    return (
        "#!/usr/bin/env python3\n"
        f"# fuzzbot repro: {line}\n#\n"
        + "".join(f"# {text}\n" for text in _install(spec, info))
        + "# Run:     python repro.py\n#\n"
        + f"# Backend {_shown(spec)}, level {spec.level or (info.level if info else 'default')}{found}.\n"
        + _EXITS.format(bug=bug, other=other)
        + "\n"
    )


def _install(spec: BackendSpec, info: BackendInfo | None) -> list[str]:
    """What to install, pinned to the build the finding came from."""
    version = info.version.split("+")[0] if info else None
    if spec.plugin:
        return [
            "Install: pip install numpy",
            f"         and the compiler under test{f' ({_build(info)})' if info else ''},",
            "         with whatever the adapter below imports. fuzzbot itself is not needed.",
        ]
    cls = adapter_class(spec.adapter)
    pins = [p.format(version=version) if version else p.split("=")[0] for p in cls.repro_requires]
    lines = [f"Install: pip install numpy {' '.join(pins)}".rstrip()]
    return lines + ([f"         {cls.repro_note}"] if cls.repro_note else [])


def _shown(spec: BackendSpec) -> str:
    """A plugin file by its name alone: where it lies on the bot's machine is nobody's business."""
    return f"{Path(spec.plugin_file).name}:{spec.adapter.partition(':')[2]}" if spec.plugin_file else spec.name


def _build(info: BackendInfo) -> str:
    return f"{info.name} {info.version}" + (f" at commit {info.commit}" if info.commit else "")


def _patterns(spec: BackendSpec) -> list[str]:
    """The backend's own "not supported" messages; a plugin's are read from its class when it loads."""
    return [] if spec.plugin else list(adapter_class(spec.adapter).unsupported)


def _refused_node(spec: BackendSpec) -> str | None:
    """How the backend's refusals name a node (Adapter.refused_node); a plugin's: none."""
    return None if spec.plugin else adapter_class(spec.adapter).refused_node


def _backend_code(spec: BackendSpec, info: BackendInfo | None) -> str:
    if not spec.plugin:
        snippet: str = adapter_class(spec.adapter).repro_snippet(spec.level, spec.option_dict)
        return snippet.rstrip("\n") + "\n\n"
    module, _, qualname = spec.adapter.partition(":")
    if spec.plugin_file:
        load = _plugin_file_loader(Path(spec.plugin_file), module, qualname)
    else:
        load = f"def load_adapter():\n    from {module} import {qualname}\n\n    return {qualname}\n\n\n"
    level = spec.level or (info.level if info else "")
    return (
        f"LEVEL = {level!r}\nOPTIONS = {spec.option_dict!r}\n"
        f"FUZZBOT_BASE = {_literal(_stand_in())}\n\n\n{_STAND_IN_LOADER}{load}{_PLUGIN_RUN}"
    )


def _plugin_file_loader(path: Path, module: str, qualname: str) -> str:
    """The plugin file's source, run as the module the worker imports it as."""
    try:
        source = path.read_text()
    except OSError as e:
        why = f"the plugin file {path} could not be read when this repro was written ({e.strerror})"
        return f"def load_adapter():\n    raise CannotTell({why!r})\n\n\n"
    return (
        f"PLUGIN_SOURCE = {_literal(source)}\n\n\n"
        "def load_adapter():\n"
        "    import types\n\n"
        f"    plugin = types.ModuleType({module!r})\n"
        f"    sys.modules[{module!r}] = plugin\n"
        f"    exec(compile(PLUGIN_SOURCE, {path.name!r}, 'exec'), plugin.__dict__)\n"
        f"    return plugin.{qualname}\n\n\n"
    )


_BOT_ONLY = frozenset({"adapter_snippet", "repro_snippet"})
"""Parts of the adapter base only the bot calls: left out of the stand-in."""


def _stand_in() -> str:
    """fuzzbot's adapter base without docstrings and bot-only parts: the very code plugins
    subclass in the worker (standard library and numpy), so it cannot drift from what it
    stands in for."""
    tree = ast.parse(Path(base.__file__).read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            kept = [s for s in body if not _docstring(s) and getattr(s, "name", None) not in _BOT_ONLY]
            setattr(node, "body", kept or [ast.Pass()])  # noqa: B010 - any node kind with a body
    return ast.unparse(tree) + "\n"


def _docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def _raw(text: str) -> str:
    raw = f"r'{text}'" if "'" not in text else f'r"{text}"'
    try:
        return raw if ast.literal_eval(raw) == text else repr(text)
    except (SyntaxError, ValueError):
        return repr(text)


def _patterns_literal(patterns: list[str]) -> str:
    """Regular expressions as raw strings, one a line: as their authors wrote them."""
    items = [_raw(p) if "\\" in p else repr(p) for p in patterns]
    return "[\n" + "".join(f"    {item},\n" for item in items) + "]" if items else "[]"


def _literal(text: str) -> str:
    """`text` as a readable raw triple-quoted literal where one reads back exactly, else repr."""
    for quote in ("'''", '"""'):
        candidate = f"r{quote}{text}{quote}"
        try:
            if quote not in text and ast.literal_eval(candidate) == text:
                return candidate
        except (SyntaxError, ValueError):
            continue
    return repr(text)


def _blob(data: bytes, width: int = 100) -> str:
    """zlib then base64, in lines of `width` (b64decode skips the newlines)."""
    text = base64.b64encode(zlib.compress(data, 9)).decode()
    return '"""\n' + "".join(text[i : i + width] + "\n" for i in range(0, len(text), width)) + '"""'


def _concat(arrays: list[np.ndarray]) -> bytes:
    return b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)


def _table(inputs: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray]) -> str:
    rows = [("inputs", k, v) for k, v in inputs.items()] + [("expected", k, v) for k, v in expected.items()]
    return "".join(f"    ({role!r}, {name!r}, {a.dtype.str!r}, {list(a.shape)!r}),\n" for role, name, a in rows)


def _model_text(model: onnx.ModelProto) -> str:
    """The ONNX text form as a comment, for people, when it is short; the bytes are what runs."""
    try:
        text = onnx.printer.to_text(model)
    except Exception:  # noqa: BLE001 - a printer that cannot render the model just leaves the comment out
        return ""
    if len(text) > TEXT_CHARS or text.count("\n") >= TEXT_LINES:
        return ""
    return (
        "# The model, in ONNX text form (for reading; MODEL below holds what runs):\n"
        + "".join(f"# {line}".rstrip() + "\n" for line in text.splitlines())
        + "\n"
    )
