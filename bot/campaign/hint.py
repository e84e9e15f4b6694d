"""The change itself as a hint: what a diff between base and head names, as generator features.

A PR that touches `pad_fusion.cc`, or a converter class named `Gemm`, says where its
regression would be. When both sides are refs of one repository, `git diff base head` is
that diff; when they are pip releases or interpreters, some systems ship the code that
decides what a model becomes as Python in the wheel (TVM's Relax ONNX frontend), and the
two installed packages' Python sources are diffed instead.

What a diff names is read off its changed lines, the functions and classes they sit in
(git's hunk headers; `ast` for installed sources), and the changed files' paths. Each
identifier is split into words (`fold_leaky_clip`, `LeakyRelu`) and matched to ONNX op
types: the whole name, or words that spell it (`mat_mul`), or, at half weight, a
distinctive first word (`leaky` for LeakyRelu). A few words that are Python's own
(`max`, `range`, `round`) and name ops too are not read as ops. Ops named in one file
together also give their pairs. An op named in every changed file (Add, in a compiler's
code) says less than one named in one (a `class Gemm` converter): an op weighs what the
file that names it most strongly gives it, times how few files share it (inverse document
frequency). The result only weighs generation (generator.focus): a campaign without a diff
runs as it always has.
"""

from __future__ import annotations

import ast
import difflib
import math
import re
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bot.campaign.side_setup import SideSetup
from bot.findings.summary import HintSummary, SideRecord
from generator.focus import Layer
from oracles.sides import SideName

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
NOT_OPS = frozenset(
    {"abs", "and", "or", "not", "max", "min", "sum", "range", "round", "pow", "size", "shape", "where", "identity"}
    | {"input", "mean", "log", "exp", "sign", "floor", "mod", "equal", "split", "slice", "pad", "tile", "less"}
)
"""Words that are ordinary code (Python builtins, common names) as often as op names: read as
an op only when spelled as one (`"Max"`, `Split(`), never from a lowercase word."""
MAX_HINTED_OPS = 12
"""A diff that names more op types than this (at half the top weight or more) points nowhere
in particular: onnxruntime's Python package between two releases names 31 to 58 (its
transformer and quantization tools), TVM 0.26 to 0.27's names 72 (its ONNX frontend was
reworked). Such a hint is shown, not steered by; a PR's diff names a few."""
LINE_WEIGHT = 0.5
"""What an op named in a changed line weighs, against one named by the file or the function
or class the change is in (a `transpose=` argument says less than a `class Transpose`)."""
MAX_FILES = 4000
HUNK_NEW = re.compile(r"^@@ -\S+ \+(\d+(?:,\d+)?) @@")
"""A -U0 hunk header's head side: its first line and, after a comma, how many lines."""
DIFF = ("diff", "--no-color", "--no-ext-diff", "--no-renames", "-U0")
COMMENTS = ("#", "//", "/*", "*")
DOC_SUFFIXES = frozenset({".md", ".rst", ".txt", ".adoc"})
OUTSIDE_BUILD_DIRS = frozenset({"docs", "doc", "tests", "test", ".github"})
"""Top-level folders of a repository that no build installs."""
FUNCNAME_DRIVERS = {"py": "python", "cc": "cpp", "cpp": "cpp", "h": "cpp", "hpp": "cpp", "cu": "cpp"}
"""git's own hunk-header patterns, so a hunk names the function it is in (`def fold_leaky_clip`)."""
TOP = 10


@dataclass
class Hunk:
    """One run of changed lines (git's -U0 hunk): the scopes that hold it, for certain."""

    lines: list[str] = field(default_factory=list)
    new_lines: set[int] = field(default_factory=set)
    scopes: list[str] = field(default_factory=list)
    """The Python classes and functions around its head lines (`Cast`, `_impl_v13`); empty
    for other languages, whose hunk header names the nearest function above, held or not."""
    deletion: bool = False


@dataclass
class Changed:
    """One changed file: its path, its changed lines, and the scopes (functions, classes) they sit in."""

    path: str
    lines: list[str] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)
    new_lines: set[int] = field(default_factory=set)
    """Head's line numbers the change wrote (where it only deleted, the line after): what
    code coverage asks a case to reach (bot.campaign.code_feedback)."""
    hunks: list[Hunk] = field(default_factory=list)
    """Filled from a git diff only: the whole change, hunk by hunk (`touched_ops`)."""


@dataclass
class ChangeHint:
    """What a two-build campaign read off its change: the summary, the focus's hinted
    layer, and head's changed line numbers by path."""

    summary: HintSummary
    layer: Layer = field(default_factory=Layer)
    lines: dict[str, set[int]] = field(default_factory=dict)
    touched: frozenset[str] | None = None
    """The op types the change can have touched, where every changed line is accounted
    for (`touched_ops`); None where it is not, or the diff is not the whole change."""

    @classmethod
    def of(cls, changes: list[Changed], op_types: Iterable[str], source: str, whole: bool = False) -> ChangeHint:
        """`whole`: the diff is the whole change (git's, between two commits built here),
        not only the Python part of two builds' installed packages."""
        op_types = list(op_types)
        summary, layer = read_hint(changes, op_types, source)
        touched = touched_ops(changes, OpNames(op_types)) if whole else None
        return cls(summary, layer, {c.path: set(c.new_lines) for c in changes if c.new_lines}, touched)


def spelled_words(identifier: str) -> list[str]:
    """`fold_leaky_clip` -> fold, leaky, clip; `OnnxMean` -> Onnx, Mean: the words as written."""
    return [w for part in identifier.split("_") for w in CAMEL.findall(part)]


def words(identifier: str) -> list[str]:
    """`fold_leaky_clip` -> fold, leaky, clip; `LeakyRelu` -> leaky, relu; `QLinearMatMul` -> q, linear, mat, mul."""
    return [w.lower() for w in spelled_words(identifier)]


class OpNames:
    """ONNX op types as a diff spells them."""

    def __init__(self, op_types: Iterable[str]) -> None:
        self.exact = {op: op for op in op_types}
        self.joined = {"".join(words(op)): op for op in op_types}
        firsts: dict[str, list[str]] = defaultdict(list)
        for op in op_types:
            split = words(op)
            if len(split) > 1 and len(split[0]) >= 4:
                firsts[split[0]].append(op)
        self.first_word = {w: ops[0] for w, ops in firsts.items() if len(ops) == 1}
        """A distinctive first word (`leaky`): one op type starts with it (`reduce` starts ten)."""

    def named(self, identifier: str) -> dict[str, float]:
        """The op types one identifier names, with weights."""
        if identifier in self.exact:
            return {identifier: 1.0}
        spelled = spelled_words(identifier)
        split = [w.lower() for w in spelled]
        found: dict[str, float] = {}
        used: set[int] = set()
        for n in (3, 2, 1):  # longest first: `mat_mul` is MatMul, and its `mul` is not Mul
            for i in range(len(split) - n + 1):
                joined = "".join(split[i : i + n])
                op = self.joined.get(joined)
                span = set(range(i, i + n))
                # A common word counts where it is spelled as the op: `OnnxMean`, never `mean`.
                if op is None or span & used or (n == 1 and joined in NOT_OPS and spelled[i] != op):
                    continue
                found[op] = 1.0
                used |= span
        if len(split) < 2:
            # One word alone is no op's first word: `torch.Tensor` is not TensorScatter, and a
            # lowercase `mean` (a common word, the op Mean's own name) is not MeanVarianceNormalization.
            return found
        for i, w in enumerate(split):
            op = self.first_word.get(w)
            if op is not None and op not in found and i not in used and w not in NOT_OPS:
                found[op] = 0.5
        return found


def read_hint(changes: list[Changed], op_types: Iterable[str], source: str) -> tuple[HintSummary, Layer]:
    """What `changes` name, as a summary and as the focus's hinted layer."""
    names = OpNames(op_types)
    per_file = [_named_in(change, names) for change in changes]
    files_naming: defaultdict[str, int] = defaultdict(int)
    for here in per_file:
        for op in here:
            files_naming[op] += 1
    ops: defaultdict[str, float] = defaultdict(float)
    pairs: defaultdict[str, float] = defaultdict(float)
    for here in per_file:
        rare = {op: w * math.log((1 + len(per_file)) / files_naming[op]) for op, w in here.items()}
        for op, w in rare.items():
            ops[op] = max(ops[op], w)
        for a in rare:
            for b in rare:
                if a != b:
                    pairs[f"{a}>{b}"] = max(pairs[f"{a}>{b}"], min(rare[a], rare[b]))
    layer = Layer()
    top = max(ops.values(), default=0.0)
    strong = sum(1 for w in ops.values() if w >= top / 2)
    broad = f"the diff names {strong} op types: too broad to steer by" if strong > MAX_HINTED_OPS else ""
    if top and not broad:
        for op, w in ops.items():
            layer.ops[op] = w / top
        for pair, w in pairs.items():
            layer.pairs[pair] = w / top
    scopes = list(dict.fromkeys(s for c in changes for s in c.scopes))
    summary = HintSummary(
        source=source,
        files=len(changes),
        ops={op: round(w / top, 3) for op, w in _most(ops)} if top else {},
        pairs=[p for p, _ in _most(pairs)],
        scopes=scopes[:TOP],
        note=broad or ("" if top else "the diff names no op type"),
    )
    return summary, layer


def touched_ops(changes: list[Changed], names: OpNames) -> frozenset[str] | None:
    """The op types a change can have touched, or None where some changed line is not
    accounted for. A hunk is accounted for by the file's path naming ops (`gemm.cc`), by a
    Python class or function around it naming one (`class Cast`), or by every line it
    changes naming one (`"Div": np.divide,` in a registry). A helper, a constant or a build
    file names none, and may touch every op: then None. Documentation and tests are no part
    of a build."""
    touched: set[str] = set()
    for change in changes:
        if _outside_build(change.path):
            continue
        by_path = _names_of([change.path.replace("/", " ").replace(".", " ")], names)
        for hunk in change.hunks:
            code = [line for line in hunk.lines if line.strip() and not line.lstrip().startswith(COMMENTS)]
            ops = by_path or _names_of(hunk.scopes, names)
            if not ops and code and all(_names_of([line], names) for line in code):
                ops = _names_of(code, names)
            if not ops and code:
                return None
            touched |= ops
    return frozenset(touched)


def _names_of(texts: Iterable[str], names: OpNames) -> set[str]:
    return {op for t in texts for m in IDENT.finditer(t) for op in names.named(m.group())}


def _outside_build(path: str) -> bool:
    parts = path.split("/")
    return parts[0] in OUTSIDE_BUILD_DIRS or Path(path).suffix.lower() in DOC_SUFFIXES


def _most(weights: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]


def _named_in(change: Changed, names: OpNames) -> dict[str, float]:
    """The ops one changed file names: by its path and the scopes changed, or (at
    LINE_WEIGHT) in its changed lines."""
    here: dict[str, float] = {}
    where = [change.path.replace("/", " ").replace(".", " "), *change.scopes]
    for texts, weight in ((where, 1.0), (change.lines, LINE_WEIGHT)):
        for identifier in {m.group() for t in texts for m in IDENT.finditer(t)}:
            for op, w in names.named(identifier).items():
                here[op] = max(here.get(op, 0.0), w * weight)
    return here


def git_changes(repo: str, base: str, head: str) -> list[Changed]:
    """`git diff base head`, by file: changed lines and the hunk headers' scopes."""
    with tempfile.NamedTemporaryFile("w", suffix=".gitattributes") as attributes:
        attributes.write("".join(f"*.{ext} diff={driver}\n" for ext, driver in FUNCNAME_DRIVERS.items()))
        attributes.flush()
        done = subprocess.run(
            ["git", "-C", repo, "-c", f"core.attributesFile={attributes.name}", *DIFF, base, head],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=120,
        )
    if done.returncode != 0:
        raise HintError(f"git diff {base[:12]} {head[:12]} failed: {done.stderr.strip()[:200]}")
    changes: list[Changed] = []
    in_hunk = False
    at = 0
    for line in done.stdout.splitlines():
        if line.startswith("diff --git "):
            changes.append(Changed(line.rpartition(" b/")[2]))
            in_hunk = False
        elif line.startswith("@@") and changes:
            in_hunk = True
            if scope := line.rpartition("@@")[2].strip():
                changes[-1].scopes.append(scope)
            at, deletion = _hunk_start(line)
            changes[-1].hunks.append(Hunk(deletion=deletion))
            if deletion:
                changes[-1].new_lines.add(at)
                changes[-1].hunks[-1].new_lines.add(at)
        elif in_hunk and line[:1] in ("+", "-"):
            changes[-1].lines.append(line[1:])
            changes[-1].hunks[-1].lines.append(line[1:])
            if line[0] == "+":
                changes[-1].new_lines.add(at)
                changes[-1].hunks[-1].new_lines.add(at)
                at += 1
    return changes


def _hunk_start(header: str) -> tuple[int, bool]:
    """Head's first line of a -U0 hunk, and whether the hunk only deletes: then git names the
    line before the deletion, and the line after it stands for the change."""
    match = HUNK_NEW.search(header)
    if match is None:
        return 1, False
    start, _, count = match.group(1).partition(",")
    deletion = count == "0"
    return max(int(start) + deletion, 1), deletion


class HintError(Exception):
    """A diff that could not be read: the campaign runs without a hint."""


def source_changes(base_root: Path, head_root: Path) -> list[Changed]:
    """The Python files that differ between two installed copies of one package, with the
    functions and classes (in either version) whose lines changed."""
    base_files = {p.relative_to(base_root).as_posix(): p for p in sorted(base_root.rglob("*.py"))[:MAX_FILES]}
    head_files = {p.relative_to(head_root).as_posix(): p for p in sorted(head_root.rglob("*.py"))[:MAX_FILES]}
    changes = []
    for rel in sorted(set(base_files) | set(head_files)):
        old = base_files[rel].read_text(errors="replace") if rel in base_files else ""
        new = head_files[rel].read_text(errors="replace") if rel in head_files else ""
        if old == new:
            continue
        change = Changed(rel)
        old_lines, new_lines = old.splitlines(), new.splitlines()
        touched_old: set[int] = set()
        touched_new: set[int] = set()
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes():
            if tag == "equal":
                continue
            change.lines += old_lines[i1:i2] + new_lines[j1:j2]
            touched_old.update(range(i1 + 1, i2 + 1) or {i1 + 1})
            touched_new.update(range(j1 + 1, j2 + 1) or {j1 + 1})
        change.scopes = list(dict.fromkeys([*_scopes(old, touched_old), *_scopes(new, touched_new)]))
        change.new_lines = touched_new
        changes.append(change)
    return changes


def _scopes(source: str, lines: set[int]) -> list[str]:
    """Names of the classes and functions that hold any of `lines` (innermost last)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            end = node.end_lineno or node.lineno
            if any(node.lineno <= n <= end for n in lines):
                found.append(node.name)
    return found


def with_python_scopes(changes: list[Changed], checkout: Path) -> list[Changed]:
    """Each changed Python file's scopes read off head's source too: git's hunk header names
    only the nearest `def` (`def forward(self, ...)`), where the class around it names the
    op (`class OnnxHardSigmoid`)."""
    for change in changes:
        path = checkout / change.path
        if change.path.endswith(".py") and change.new_lines and path.is_file():
            source = path.read_text(errors="replace")
            scopes = _scopes(source, change.new_lines)
            change.scopes = list(dict.fromkeys([*change.scopes, *scopes]))
            for hunk in change.hunks:
                if not hunk.deletion:  # a deletion's line after may sit in another scope than what went
                    hunk.scopes = _scopes(source, hunk.new_lines)
    return changes


def package_root(module_file: str) -> Path | None:
    """The folder of the package a module file belongs to (its top-level package's)."""
    path = Path(module_file)
    return path.parent if path.name == "__init__.py" else None


def change_hint(
    setups: list[SideSetup],
    records: dict[str, SideRecord],
    imports: dict[str, dict[str, str]],
    systems: list[str],
    op_types: Iterable[str],
    sources: bool = True,
) -> ChangeHint:
    """The hint of a two-build campaign: `git diff` when both sides are commits fuzzbot
    built, else the diff of the system's installed Python sources; an empty layer (and a
    note saying why) when neither is there to read. `sources=False`: the git diff only, for
    what head's probe must ask (`touched`), which installed sources never say."""
    base, head = records.get(SideName.base), records.get(SideName.head)
    own = next((s.roots.own for s in setups if s.name == SideName.head and s.roots is not None), None)
    try:
        if base is not None and head is not None and base.commit and head.commit and own is not None:
            checkout = own / f"checkout-{head.commit[:12]}"
            if checkout.is_dir():
                changes = with_python_scopes(git_changes(str(checkout), base.commit, head.commit), checkout)
                source = f"git diff {base.commit[:12]} {head.commit[:12]}"
                return ChangeHint.of(changes, op_types, source, whole=True)
        if not sources:
            return ChangeHint(HintSummary(source="none", note="no git diff between two commits built here"))
        pairs = [(imports.get(SideName.base, {}).get(m), imports.get(SideName.head, {}).get(m)) for m in systems]
        roots = [(package_root(b), package_root(h)) for b, h in pairs if b and h]
        changes = [c for b, h in roots if b is not None and h is not None and b != h for c in source_changes(b, h)]
    except (HintError, OSError, subprocess.TimeoutExpired) as e:
        return ChangeHint(HintSummary(source="none", note=f"no hint: {e}"))
    if changes:
        return ChangeHint.of(changes, op_types, f"Python sources of {', '.join(systems)} in the two builds")
    what = "the two builds' Python sources are the same" if roots else "no diff to read (no commits, no Python sources)"
    return ChangeHint(HintSummary(source="none", note=what))
