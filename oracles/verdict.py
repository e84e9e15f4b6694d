"""One backend's run judged against the reference."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Protocol

import numpy as np
from pydantic import BaseModel

from backends.death import is_memory_fault
from backends.results import RunResult, Status
from oracles.compare import Comparison, Edges, compare
from oracles.signature import fingerprint, normalize
from oracles.tolerances import Tolerance


class Verdict(StrEnum):
    pass_ = "pass"
    crash = "crash"
    """An exception from the backend or a dead worker: both are bugs on a valid model."""
    timeout = "timeout"
    wrong_result = "wrong_result"
    unsupported = "unsupported"
    """The backend declined the model with one of its declared "not supported" messages."""

    @property
    def is_bug(self) -> bool:
        """Only these are findings: a pass or a declared limitation is never reported."""
        return self not in (Verdict.pass_, Verdict.unsupported)


class Symptom(StrEnum):
    """The symptoms of a failed run that are one word (`Judgement.symptom`); a dead worker
    says `signal N` when a signal killed it, and a wrong result names its kinds of mismatch."""

    exception = "exception"
    """The backend raised (Status.error): an orderly error with a message."""
    exit = "exit"
    """The worker died without a signal."""
    hang = "hang"
    unsupported = "unsupported"


class Judgement(BaseModel):
    verdict: Verdict
    stage: str | None = None
    symptom: str = ""
    message: str = ""
    signature: str = ""
    fingerprint: str = ""
    comparison: Comparison | None = None
    judged_by: str = ""
    """Which computation the values were compared with (oracles.references.Source); empty
    when no values were compared (a crash, a hang, a declined model, an undefined input)."""
    undefined: str = ""
    """Why the case's result is unspecified by ONNX (oracles.undefined), when it is."""
    kernel: str = ""
    """Of a wrong result: `domain::Op` of the node that computed the first wrong output in
    the graph the backend ran (its optimized graph where the adapter reads it back, else
    the model's), which names the bug across triggers (bot.reduce.finding). Of a reduced
    death at compile: where in the optimizer it died (`after <pass>`, backends.death)."""


def judge(
    result: RunResult,
    expected: Mapping[str, np.ndarray],
    op_signature: str,
    tolerances: dict[str, Tolerance] | None = None,
    per_output: Mapping[str, Tolerance] | None = None,
    envelope: Mapping[str, Edges] | None = None,
) -> Judgement:
    """`op_signature` names the model's ops; it identifies wrong results, whose
    messages carry nothing stable. `per_output` bounds (by output name, from the
    outputs' provenance) beat the per-dtype `tolerances`; `envelope` holds the other edges
    of what the outputs may legitimately be (float16 kept wider, or summed step by step)."""
    backend = result.backend.name if result.backend else "unknown"
    stage = result.stage.value if result.stage else None
    if result.status is Status.unsupported:
        return Judgement(
            verdict=Verdict.unsupported, stage=stage, symptom=Symptom.unsupported.value, message=result.message
        )
    if result.status in (Status.error, Status.crash, Status.timeout):
        verdict = Verdict.timeout if result.status is Status.timeout else Verdict.crash
        symptom = {
            Status.error: Symptom.exception.value,
            Status.crash: f"signal {result.signal}" if result.signal else Symptom.exit.value,
            Status.timeout: Symptom.hang.value,
        }[result.status]
        signature = normalize(result.message) if result.status is Status.error else symptom
        return Judgement(
            verdict=verdict,
            stage=stage,
            symptom=symptom,
            message=result.message,
            signature=signature,
            fingerprint=fingerprint(backend, verdict.value, stage or "", signature),
        )
    comparison = compare(expected, result.outputs, tolerances, per_output, envelope)
    if comparison.ok:
        return Judgement(verdict=Verdict.pass_, stage=stage, comparison=comparison)
    symptom = "+".join(sorted({o.mismatch.value for o in comparison.outputs if o.mismatch}))
    signature, fp = wrong_result_name(backend, symptom, op_signature)
    return Judgement(
        verdict=Verdict.wrong_result,
        stage="run",
        symptom=symptom,
        message=comparison.summary(),
        signature=signature,
        fingerprint=fp,
        comparison=comparison,
    )


def wrong_result_name(backend: str, symptom: str, op_signature: str) -> tuple[str, str]:
    """(signature, fingerprint) of a wrong result: its kind of mismatch and the ops that
    produced it; after reduction `op_signature` is the reduced model's canonical form."""
    signature = f"{symptom} in {op_signature}"
    return signature, fingerprint(backend, Verdict.wrong_result.value, signature)


MEMORY_FAULT = "memory fault"
"""The crash kind of every death by memory corruption, whichever signal it came with."""


class Symptomatic(Protocol):
    """A failure as told: a Judgement, or anything named like one (oracles.bug_identity)."""

    @property
    def symptom(self) -> str: ...
    @property
    def message(self) -> str: ...


def crash_kind(j: Symptomatic) -> str:
    """What kind of failure a crash is, for identity: the symptom, except that deaths by
    memory corruption (backends.death) are one kind, `memory fault`, whose signal varies
    from run to run and build to build."""
    signal = j.symptom.removeprefix("signal ") if j.symptom.startswith("signal ") else None
    return MEMORY_FAULT if is_memory_fault(signal, j.message) else j.symptom
