"""A bug's identity: whether a failure is the same bug as another, and the name a reduced
bug is reported under.

**The same bug**, one definition at the four distances the bot asks it from. The question
comes up wherever a failure is asked again: a reduction's candidates on the
build that failed the original, the other build of a persistent bug while it is reduced,
each commit of a bisection, and a mutant of a finding's model. The first three used to
answer it each in its own class, and the answers drifted apart without anyone deciding
they should. They do differ, and each
difference has a reason, kept here beside the others:

- **The same build** (`Distance.run`): the verdict, a wrong result's kinds of mismatch (no
  new kind: shape where values differed is another bug), a crash's stage, its kind of death
  (a memory fault is one kind whatever its signal), and an exception's message, normalized
  and nearly equal (one dimension or op name more or fewer is the same check).
- **Another build** (`Distance.build`): the verdict, and for a failure other than a wrong
  result its stage and symptom. Never the message: another release words its checks its
  own way, and a reworded message must not read as "base passes".
- **Another commit** (`Distance.commit`): the model stays fixed while the build changes. A
  wrong result keeps its kind of mismatch; a death keeps its kind; anything else keeps its
  signature (the normalized message and the ops), which a reduced bundle holds in canonical
  form.
- **A mutant of the model that showed it** (`Distance.mutant`): the build stays, the model
  moves one step. A crash is the same as at the same build. A wrong result needs, besides,
  the same kernel to have computed its first wrong output: an unreduced wrong result is
  named by its model's op list (oracles.verdict), so every mutant of a buggy model that
  shows the bug again would be a finding of its own. A 600 s onnxruntime nightly with
  mutation on kept 572 findings, 432 of them mutants, and reduced 11.

**A reduced bug's name** (its fingerprint) is what the failure's evidence says caused it,
most specific first: the one rewrite whose absence alone makes the build right
(bot.reduce.rewrite_blame), the kernel that computed the first wrong tensor
(bot.reduce.blame), the check that failed or the pass a worker died in; the label always
splits. The trigger's structure names only what has none of these (bot.reduce.generalize).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from enum import Enum
from typing import Protocol

from backends.results import BackendInfo
from oracles.compare import Mismatch
from oracles.sides import Localization
from oracles.signature import SOURCE_CHECK, crash_site, fingerprint, normalize
from oracles.verdict import Judgement, Symptom, Verdict, crash_kind

MESSAGE_SIMILARITY = 0.85
"""Crash messages match when their normalized forms are equal, or at least this similar
(difflib ratio). Normalization erases names, numbers and paths; the ratio lets a
message that mentions one more or one fewer dimension or op name still count as the
same crash, while a different error class or different wording does not."""


class Distance(Enum):
    """How far the build that answered is from the one that showed the original."""

    run = "run"
    """The same build: a run again, or a candidate of the reduction."""
    build = "build"
    """Another build of the compiler: the other side of a persistent bug."""
    commit = "commit"
    """A commit of a bisection, judged on the bug's own fixed model."""
    mutant = "mutant"
    """The same build, on a mutant of the model (bot.cases.mutation) that showed the original."""


def similar_messages(a: str, b: str) -> bool:
    na, nb = normalize(a), normalize(b)
    return na == nb or difflib.SequenceMatcher(None, na, nb).ratio() >= MESSAGE_SIMILARITY


def is_death(j: Judgement) -> bool:
    """A crash without a message: a signal, a timeout, a memory fault."""
    return j.verdict is Verdict.crash and j.symptom != Symptom.exception


def same_bug(original: Judgement, j: Judgement, distance: Distance) -> bool:
    """Whether `j`, from a build at `distance` from the original's, shows the original's bug."""
    if j.verdict is not original.verdict:
        return False
    if distance is Distance.build:
        return j.verdict is Verdict.wrong_result or (j.stage, j.symptom) == (original.stage, original.symptom)
    if distance is Distance.commit:
        return _same_at_another_commit(original, j)
    if distance is Distance.mutant and j.verdict is Verdict.wrong_result and not _same_kernel(original, j):
        return False
    if j.verdict is Verdict.wrong_result:
        return set(j.symptom.split("+")) <= set(original.symptom.split("+"))
    if original.stage and j.stage != original.stage:
        return False
    if crash_kind(j) != crash_kind(original):
        return False
    return j.symptom != Symptom.exception or similar_messages(j.message, original.message)


def _same_kernel(original: Judgement, j: Judgement) -> bool:
    """Whether one named kernel computed both wrong results' first wrong outputs."""
    return bool(j.kernel) and j.kernel == original.kernel


def as_sighting_of(shown: Sequence[Judgement], j: Judgement) -> Judgement:
    """`j` under the name of the first of `shown`, failures of the model `j`'s is a mutant of,
    whose bug it shows again (Distance.mutant); else `j` as it is. Named so, it is a sighting
    of that finding: counted there, triaged as it is (oracles.judging_budget's settled
    failures), and once that finding is reduced, an occurrence of the bug it names."""
    if not j.verdict.is_bug:
        return j
    original = next((o for o in shown if same_bug(o, j, Distance.mutant)), None)
    if original is None or original.fingerprint == j.fingerprint:
        return j
    return j.model_copy(update={"fingerprint": original.fingerprint, "signature": original.signature})


def _same_at_another_commit(original: Judgement, j: Judgement) -> bool:
    if original.verdict is Verdict.wrong_result and original.symptom:
        return j.symptom == original.symptom
    if is_death(original) and crash_kind(original):
        return j.symptom != Symptom.exception and crash_kind(j) == crash_kind(original)
    return j.signature == original.signature


class Named(Protocol):
    """What a reduced finding's name is made of (bot.findings.bundle.Finding has it all)."""

    @property
    def verdict(self) -> Verdict: ...
    @property
    def stage(self) -> str | None: ...
    @property
    def symptom(self) -> str: ...
    @property
    def signature(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def kernel(self) -> str: ...
    @property
    def backend(self) -> BackendInfo: ...
    @property
    def blamed(self) -> str: ...
    @property
    def rewrite(self) -> str: ...
    @property
    def form(self) -> str: ...
    @property
    def localization(self) -> Localization | None: ...


def kernel_fingerprint(finding: Named, label: str) -> str:
    """A reduced wrong result's identity: the kernel that computed the wrong output, the kind
    of mismatch, the label, and whether the optimizer is needed. One integer-GEMM defect
    reached through MatMulInteger at three input forms was three reports under trigger-based
    names; a kernel names the bug as syzbot names a crash by the function that crashed.
    Evidence of two bugs splits them: another label (fixed here, persistent there), or one
    trigger that needs the optimizer (a fusion's LayerNormalization, wrong on every element)
    beside one that does not (the kernel's own variance, wrong on two).

    Wrong numbers are one kind whether or not they happen to be NaN or Inf: TVM 0.26's
    GatherElements reads out of bounds at a negative index, and the garbage it returns was
    NaN in one reduced trigger and finite in another (two reports of one bug). Wrong
    shapes, types and missing outputs stay kinds of their own."""
    local = finding.localization
    needs = "" if local is None else f" optimizer:{local.depends_on_optimization}"
    blamed = finding.blamed or f"{finding.symptom} at {finding.kernel}"
    name = f"{_numbers_as_values(blamed)} {label}{needs}"
    return fingerprint(finding.backend.name, Verdict.wrong_result.value, name)


WRONG_NUMBERS = frozenset({Mismatch.values.value, Mismatch.nonfinite.value})
"""The mismatch kinds of a tensor whose numbers are wrong."""


def _numbers_as_values(blamed: str) -> str:
    """`nonfinite at K` (or `nonfinite+values at K`, as a wrong result joins its kinds) as
    `values at K`; any other name as is."""
    kinds, at, kernel = blamed.partition(" at ")
    if at and set(kinds.split("+")) <= WRONG_NUMBERS:
        return f"{Mismatch.values.value} at {kernel}"
    return blamed


def rewrite_fingerprint(finding: Named, label: str) -> str:
    """A reduced failure's identity when one rewrite alone is to blame (bot.reduce.rewrite_blame):
    that rewrite and the label, whatever the kernel and the symptom. A rewrite that builds a
    node its kernel cannot hold shows it as the kernel does: a type error at load, a failed
    check at run time, wrong values. Another label splits them, as for a kernel."""
    return fingerprint(finding.backend.name, "rewrite", f"{finding.rewrite} {label}")


def form_fingerprint(finding: Named, label: str) -> str:
    """A reduced failure's identity when one spelling alone is to blame (bot.reduce.form_blame):
    that spelling and the label, whatever the kernel, the check and the symptom."""
    return fingerprint(finding.backend.name, "form", f"{finding.form} {label}")


def crash_site_fingerprint(finding: Named, label: str) -> str:
    """A reduced crash's identity: the check that failed (oracles.signature.crash_site), or
    for a death in the optimizer the pass it died in (`finding.kernel`, with the kind of
    death: backends.death), its stage (none for a check named by its source line, which is
    one check at load and at run) and the label. Another label splits them, as for a
    wrong result's kernel."""
    site = f"{crash_kind(finding)} {finding.kernel}" if finding.kernel else crash_site(finding.signature)
    stage = "" if SOURCE_CHECK.search(site) else f"{finding.stage} "
    name = f"{stage}crash at {site} {label}"
    return fingerprint(finding.backend.name, Verdict.crash.value, name)
