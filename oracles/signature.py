"""Normalized failure messages, canonical op signatures and stable fingerprints.

Two runs of the same bug differ in addresses, tensor and node names, shapes, line
numbers and temp paths; those are erased so that the same bug always hashes to the
same fingerprint, whichever seed found it. A wrong result has no message at all, so
it is named by the structure of its (reduced) model instead.
"""

from __future__ import annotations

import functools
import hashlib
import re

import onnx

from oracles.provenance import tensor_dtypes

_ERASE_FIRST: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r" \[with [^\]]*\]"), " [with <types>]"),
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"(?:[A-Za-z]:)?/?(?:[\w.+-]+/)+[\w.+-]*"), "<path>"),
    (re.compile(r"`([\w.]+)\([^`]*\)(?: -> [^`]*)?`"), r"`\1`"),
    (re.compile(r"\b(R\.shape\(\[|R\.Tensor\(\()[^()\[\]]*"), r"\1<dims>"),
    (re.compile(r"(does not exist:)\s*\S*?(for node)"), r"\1 <name> \2"),
]
"""Run before names are judged: a path or an address is never a name worth keeping; a
quoted call signature is its function's name (TVM's FFI quotes
`relax.op.one_hot(0: ir.Expr, ..., 4: int) -> ir.Expr` when it refuses an argument, and
the whole quote, no name, was erased: every refused FFI argument looked alike). A shape TVM
prints (`R.shape([batch, 91])`, `R.Tensor((num_nonzero, 21), ...)`) is the trigger's, symbolic
dims and all: one ScatterND shape check refusing dims it could not prove equal was three
reports, by `range_len_0`, `batch` and `num_nonzero`. onnxruntime glues a tensor's name to
the next word ("a name which does not exist:t5for node"), which no name rule sees whole.
A C++ template's arguments (gcc's `[with T = double; U = double]` in onnxruntime's failed
checks) are the types the trigger reached one check at: onnxruntime 1.17.3's STFT
`window_size < signal_size` check was three `fixed` reports, at float, double and complex
input. They are erased to a mark of one length, since the message is cut at 300 characters
after this and a name cut at another place is another name."""

_ERASE_AFTER: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?:t|w|c|n|x|y|input|output|node|onnx::\w+?)_?\d+(?:_\w+)?\b"), "<name>"),
    (re.compile(r"\b(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b"), "<hash>"),
    (re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"), "<n>"),
    (re.compile(r"(?:<n>\s*[x,]\s*)*<n>\s*,?(?=\s*[)\]])|(?:<n>\s*[x,]\s*)+<n>"), "<n>"),
    (re.compile(r"\s+"), " "),
]

_QUOTED = re.compile(r"(?<!\w)'[^']*'|\"[^\"]*\"|`[^`]*`")
"""A quoted token; an apostrophe inside a word (`doesn't`) opens none."""

_NAMESPACES = r"(?:relax|R|tir|T|topi|te|tvm|relay|ov|opset\d+|aten|prim|torch)"
"""Where the systems fuzzbot drives name their ops and types: TVM (`relax.sqrt`, `tir.exp`,
`R.power`, `T.int32`), OpenVINO (`opset1::Select`, `ov::op::v1::Add`), torch (`aten::add`).
`onnx::` is not one: exporters name tensors `onnx::Add_7`."""

_QUALIFIED = re.compile(rf"\b{_NAMESPACES}(?:(?:\.|::)[A-Za-z_]\w*)+")

_DTYPE = re.compile(
    r"\b(?:bool(?:ean)?|u?int(?:4|8|16|32|64)|float(?:16|32|64)?|bfloat16|float8\w+|float4\w+|double|half"
    r"|complex(?:64|128)|string|bf16|[uif](?:1|4|8|16|32|64)|f8e\w+)\b"
)
"""Element types as numpy, ONNX, TVM, LLVM (`i1`) and OpenVINO (`u8`, `f32`) spell them."""

_ATTR_VALUE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{2,}")
"""An upper-case attribute value (`SAME_LOWER`, `NOTSET`, `VALID`); fuzzbot never names a
tensor in capitals."""


class _Kept:
    """Tokens set aside while the erasing rules run, each standing in the text as one
    private-use character, which no rule matches (it is neither `\\w` nor a digit)."""

    FIRST, LAST = 0xE000, 0xF8FF

    def __init__(self) -> None:
        self.tokens: list[str] = []

    def hold(self, m: re.Match[str]) -> str:
        if self.FIRST + len(self.tokens) > self.LAST:
            return m.group(0)  # out of marks: left to the rules (a line of thousands of names)
        self.tokens.append(m.group(0))
        return chr(self.FIRST + len(self.tokens) - 1)

    def restore(self, text: str) -> str:
        return re.sub(
            f"[{chr(self.FIRST)}-{chr(self.LAST)}]", lambda m: self.tokens[ord(m.group(0)) - self.FIRST], text
        )


@functools.cache
def onnx_op_types() -> frozenset[str]:
    """Every op type any opset of any domain onnx knows (`Shrink`, `MaxPool`, `ReduceL2`)."""
    return frozenset(s.name for s in onnx.defs.get_all_schemas_with_history())


@functools.cache
def _op_type_words() -> re.Pattern[str]:
    names = sorted(onnx_op_types(), key=len, reverse=True)
    return re.compile(r"\b(?:" + "|".join(map(re.escape, names)) + r")\b")


def is_meaningful_name(token: str) -> bool:
    """Whether a quoted token names what failed rather than where: an op in a known
    namespace, an ONNX op type, a dtype or an upper-case attribute value."""
    return bool(
        _QUALIFIED.fullmatch(token)
        or _DTYPE.fullmatch(token)
        or _ATTR_VALUE.fullmatch(token)
        or token in onnx_op_types()
    )


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


_RUNNING_NODE = re.compile(r"Non-zero status code returned while running \w+ node\. Name:\s*\S*\s*Status Message:\s*")
"""onnxruntime's preamble naming the node that ran the kernel whose check failed."""


_INITIALIZING = re.compile(r"Exception during initialization:\s*")
"""onnxruntime's preamble for a check that failed while the session was made: a kernel its
constant folding ran, whose same check fails at run time when the input is not constant
(ReduceMean's "Reduction on all axes, output size should be 1": one report at each stage)."""

SOURCE_CHECK = re.compile(r"<path>:<n>")
"""A check named by its source file and line: one check, whichever stage ran into it."""


_GOT_TYPE = re.compile(r"(Mismatched type on argument #\S+ when calling: .*?\. Expected \S+) but got .*?(?= \(T: |$)")
"""TVM's FFI refusing an argument: the call and what it expected name the site, the type it
got is the trigger's."""


_NODE_NAMED = re.compile(r"\bNode \([^)]*\) Op \(")
"""onnxruntime's "Node (<name>) Op (<type>)": the node is the trigger's (its own, or one its
optimizer made and named, `gemm_input_reshape_arg_q`), the op type the site's."""


_TYPES_SEEN = re.compile(r" \(T: [^)]*\)$")
"""The dtypes a reduced trigger failed at (bot.reduce.generalize): one check reached at
float32 by one trigger and at every type by another is still one check."""


def crash_site(signature: str) -> str:
    """Where a crash's normalized message says the check failed, without the node that ran
    into it: onnxruntime's "Size of X.shape[axis:] must be larger than 1" is one check of
    one normalization kernel, whether a LayerNormalization or the SimplifiedLayerNormalization
    a fusion made ran it (two reports of one bug before). syzbot titles a crash the same way,
    by the function that crashed; the node is a trigger (a QuantizeLinear that onnxruntime's
    QDQ rewrites made, `t1_q` in one graph and `gemm_input_reshape_arg_q` in another, failed
    one type check: two reports). So is the value that a TVM FFI call
    refused: its OneHot converter passes a constant depth on to `relax.op.one_hot`, which
    expects an `int`, and "got `float`" (a scalar depth) and "got `ffi.Array`" (a depth of
    shape [1]) were two reports of that one line."""
    site = _INITIALIZING.sub("", _RUNNING_NODE.sub("", signature))
    site = _GOT_TYPE.sub(r"\1", _NODE_NAMED.sub("Node Op (", site))
    return _TYPES_SEEN.sub("", site)


def normalize(message: str) -> str:
    """`Type: meaningful line` with every run-specific detail replaced by a placeholder.

    What differs between two runs of one bug is erased: addresses, paths, numbers, shapes,
    hashes, and the names of tensors and nodes, which a generator numbers (`t12`, `n3`,
    `x_12`) and an exporter prefixes (`onnx::Add_7`, `/model/Add_1`). What says which bug
    it is stays, even in quotes, because a quoted token is not always a name: TVM quotes
    the op it failed in (`name="relax.sqrt"` for an int ReduceL2, `"relax.log"` for an
    int ReduceLogSum: erased, two bugs would share one fingerprint), as it quotes dtypes
    (`dtype="int64"`), and frontends quote op types (`'Shrink'`) and attribute values
    (`'SAME_LOWER'`). So a quoted token is kept only when it is such a word
    (`is_meaningful_name`), and erased otherwise: an allow-list, because a name a user
    gave (`'input'`, `'y'`) looks like any other word. Unquoted, dtypes, op types and
    namespaced ops are shielded from the number rule (`int32` is not `int<n>`, `ReduceL2`
    not `ReduceL<n>`). The price is that one bug seen at two dtypes may get two names;
    reduction's dtype generalization (bot.reduce.generalize) is what folds those, by asking the
    builds whether the type matters, which no message can say.
    """
    kind, text = _meaningful(message)
    for pattern, repl in _ERASE_FIRST:
        text = pattern.sub(repl, text)
    kept = _Kept()
    text = _QUOTED.sub(lambda m: kept.hold(m) if is_meaningful_name(m.group(0)[1:-1]) else "<name>", text)
    for shielded in (_QUALIFIED, _DTYPE, _op_type_words()):
        text = shielded.sub(kept.hold, text)
    for pattern, repl in _ERASE_AFTER:
        text = pattern.sub(repl, text)
    text = kept.restore(text)
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
