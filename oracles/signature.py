"""Normalized failure messages, canonical op signatures and stable fingerprints.

Two runs of the same bug differ in addresses, tensor and node names, shapes, line
numbers and temp paths; those are erased so that the same bug always hashes to the
same fingerprint, whichever seed found it. A wrong result has no message at all, so
it is named by the structure of its (reduced) model instead.
"""

from __future__ import annotations

import hashlib
import re

import onnx

from oracles.provenance import tensor_dtypes

_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"(?:[A-Za-z]:)?/?(?:[\w.+-]+/)+[\w.+-]*"), "<path>"),
    (re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`"), "<name>"),
    (re.compile(r"\b(?:t|w|c|n|x|y|input|output|node|onnx::\w+?)_?\d+(?:_\w+)?\b"), "<name>"),
    (re.compile(r"\b(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b"), "<hash>"),
    (re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"), "<n>"),
    (re.compile(r"(?:<n>\s*[x,]\s*)*<n>\s*,?(?=\s*[)\]])|(?:<n>\s*[x,]\s*)+<n>"), "<n>"),
    (re.compile(r"\s+"), " "),
]

_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failure|Fault|Interrupt)\w*)\s*:\s*")
_FRAME = re.compile(r"^(?:File \"|at |\d+: |#\d+ |\[bt\]|Stack trace|During handling|The above exception)")


_ORT_STATUS = re.compile(r"^(?:\w+:\s*)?\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*[A-Z_]+\s*:\s*")
"""onnxruntime's `[ONNXRuntimeError] : 1 : FAIL :` prefix: its status code for one failure
changes between releases (FAIL, RUNTIME_EXCEPTION), and so does the Python class."""

_LOCATION_ONLY = re.compile(r"^(?:Exception from )?\S+:\d+:?$")
"""OpenVINO's `Exception from src/.../core.cpp:112:` lines: where, not what."""


def exception_type(line: str) -> str:
    """The exception class a line starts with (`TypeError: ...`), or ""."""
    m = _EXCEPTION.match(line.strip())
    return m.group(1).rsplit(".", 1)[-1] if m else ""


def _meaningful(message: str) -> tuple[str, str]:
    """(exception type, the line that says what went wrong): after a traceback its last
    line, else the first line that is neither a stack frame nor a bare source location."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    kind = exception_type(lines[0]) if lines else ""
    if any(line.startswith("Traceback") for line in lines):
        lines = [line for line in lines if not line.startswith("Traceback") and not _FRAME.match(line)][-1:]
        kind = exception_type(lines[0]) if lines else kind
    for i, line in enumerate(lines):
        text = _EXCEPTION.sub("", line, count=1)
        if not text or _FRAME.match(text) or _LOCATION_ONLY.match(text):
            continue
        if _ORT_STATUS.match(text):
            kind, text = "ONNXRuntimeError", _ORT_STATUS.sub("", text, count=1)
        if text.endswith(":") and i + 1 < len(lines):  # a header such as OpenVINO's `Check '...' failed at F:N:`
            text = f"{text} {lines[i + 1]}"
        return kind, text
    return kind, ""


def meaningful_line(message: str) -> str:
    return _meaningful(message)[1]


def normalize(message: str) -> str:
    """`Type: meaningful line` with every run-specific detail replaced by a placeholder."""
    kind, text = _meaningful(message)
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)
    text = text.strip()[:300]
    return f"{kind}: {text}" if kind else text


def op_signature(model: onnx.ModelProto) -> str:
    """The sorted op types of a model: the coarse name of a wrong result before reduction."""
    return ",".join(sorted({n.op_type for n in model.graph.node}))


def canonical_ops(model: onnx.ModelProto) -> str:
    """The model's structure independent of names and node order.

    Each tensor is labelled by what computes it: `Op[dtype](label of each input)`,
    a graph input or initializer by `in[dtype]`. The signature is the sorted labels of
    the graph outputs, so two reduced models of one bug, found from different seeds,
    get the same string, and models that differ in an op or an edge do not.
    """
    dtypes = tensor_dtypes(model)
    producer = {out: n for n in model.graph.node for out in n.output if out}
    labels: dict[str, str] = {}

    def label(name: str) -> str:
        if name in labels:
            return labels[name]
        node = producer.get(name)
        if node is None:
            text = f"in[{dtypes.get(name, '?')}]"
        else:
            labels[name] = "<cycle>"
            args = ",".join(label(i) if i else "-" for i in node.input)
            text = f"{node.op_type}[{dtypes.get(name, '?')}]({args})"
        labels[name] = text
        return text

    return ";".join(sorted(label(o.name) for o in model.graph.output))


def fingerprint(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]
