"""What a reduced trigger's failure depends on, so that one bug gets one name.

A trigger found at uint8 and the same trigger found at float16 are one bug when the
failure does not need the type: fuzzbot asks the builds, not the op names. The reduced
model is re-typed to each of `GENERALIZE_DTYPES` (reducers.retype) and judged as the
campaign judges a case, with the false-positive rules and the other build as a guard.
Each type then says "fails" (the same bug, and for a regression the other build still
gets it right), "passes" (the failing build gets it right), or nothing: a type the ops do
not allow, a declined model, an undefined input, a value nobody could compute, or a
different failure is no evidence either way. The name keeps the type only where some
type passes: then the set of types that fail is part of the bug's identity. A trigger found
at a wide type (uint32) is tried at the same types and named by them, so that one bug
met at uint32 and at int32 is one report.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

import onnx

from bot.findings.bundle import DtypeEvidence
from bot.reduce.candidates import CandidateJudge, SameBug
from oracles.signature import canonical_ops, fingerprint
from oracles.verdict import Judgement, Symptom, Verdict, crash_kind, wrong_result_name
from reducers.candidate import Candidate
from reducers.retype import FOUND_ONLY_DTYPES, GENERALIZE_DTYPES, VALUE_VARIANTS, dtype_name, main_dtype, retype

Outcome = Literal["fails", "passes", "untestable"]


class TriggerOutcome:
    """Judges a re-typed trigger: the failing build must show the same bug, and for a
    regression the guard (the other build) must still get it right."""

    def __init__(self, same: SameBug, guard: CandidateJudge | None) -> None:
        self.same = same
        self.guard = guard

    def __call__(self, case: Candidate) -> Outcome:
        j = self.same.judge(case)
        if j is None or j.undefined or j.verdict is Verdict.unsupported:
            return "untestable"
        if j.verdict is Verdict.pass_:
            compared = bool(j.judged_by) or self.same.original.verdict is not Verdict.wrong_result
            return "passes" if compared else "untestable"
        if not self.same.matches(j):
            return "untestable"
        if self.guard is not None:
            g = self.guard.judge(case)
            if g is None or g.verdict is not Verdict.pass_:
                return "untestable"
        return "fails"


def dtype_evidence(case: Candidate, outcome: Callable[[Candidate], Outcome]) -> DtypeEvidence | None:
    """The trigger at every type of GENERALIZE_DTYPES; None when it has no typed input."""
    old = main_dtype(case.model)
    if old is None or old not in (*GENERALIZE_DTYPES, *FOUND_ONLY_DTYPES):
        return None
    evidence = DtypeEvidence(dtype=dtype_name(old), fails=[dtype_name(old)])
    for new in GENERALIZE_DTYPES:
        if new != old:
            getattr(evidence, _at(case, old, new, outcome)).append(dtype_name(new))
    return evidence


def _at(case: Candidate, old: int, new: int, outcome: Callable[[Candidate], Outcome]) -> Outcome:
    """The trigger at type `new`: "fails" as soon as one set of values fails, "passes" only
    when every set that could be judged passed. bool never passes: its cells hold one bit,
    so a wrong pick agrees with the right one half the time, and a pass there shows nothing."""
    seen: set[Outcome] = set()
    for variant in range(VALUE_VARIANTS):
        candidate = retype(case, old, new, variant)
        if candidate is None:
            return "untestable"
        seen.add(outcome(candidate))
        if "fails" in seen:
            return "fails"
    return "passes" if "passes" in seen and new != onnx.TensorProto.BOOL else "untestable"


TRIED = frozenset(dtype_name(t) for t in GENERALIZE_DTYPES)


def named_fails(ev: DtypeEvidence) -> list[str]:
    """The failing types a name holds: those of GENERALIZE_DTYPES, which every trigger is
    tried at whatever type it was found at; a type found-only (uint32) where none of them
    fails, a bug of its own."""
    return sorted(t for t in ev.fails if t in TRIED) or sorted(ev.fails)


_ONNX_NAMES = {
    dtype_name(t): onnx.helper.tensor_dtype_to_string(t).removeprefix("TensorProto.").lower() for t in GENERALIZE_DTYPES
}
"""numpy's name of each type to ONNX's (float32 -> float, float64 -> double), as messages say them."""


def _erase_dtype(text: str, name: str) -> str:
    words = {name, _ONNX_NAMES.get(name, name)}
    pattern = r"\b(?:" + "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)) + r")\b"
    return re.sub(pattern, "T", text)


def generalized_name(model: onnx.ModelProto, j: Judgement, backend: str, ev: DtypeEvidence | None) -> tuple[str, str]:
    """(signature, fingerprint) of a reduced finding. A wrong result, or a crash with no
    message (a signal, a hang), is named by the trigger's canonical structure; a crash with
    a message by its normalized message. Where the failure does not need the type, the
    type becomes `T`; where it does, the types that fail are part of the name."""
    named_by_model = j.verdict is Verdict.wrong_result or j.symptom != Symptom.exception
    kind = j.symptom if j.verdict is Verdict.wrong_result else crash_kind(j)
    text = f"{kind} in {canonical_ops(model)}" if named_by_model else j.signature
    if ev is not None:
        text = _erase_dtype(text, ev.dtype)
        text += f" (T: {','.join(named_fails(ev))})" if ev.needs_dtype else " (T: any)"
    if j.verdict is Verdict.wrong_result:
        signature, fp = wrong_result_name(backend, j.symptom, text.removeprefix(f"{j.symptom} in "))
        return signature, fp
    return text, fingerprint(backend, j.verdict.value, j.stage or "", text)
