"""What one run of one model on one backend produced."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from backends.arrays import NDArray


class Status(StrEnum):
    ok = "ok"
    error = "error"
    """The system raised an exception (a stage-tagged, orderly failure)."""
    crash = "crash"
    """The worker process died: a signal, or an exit nobody asked for."""
    timeout = "timeout"


class Stage(StrEnum):
    import_ = "import"
    compile = "compile"
    run = "run"


class BackendInfo(BaseModel):
    name: str
    level: str
    version: str
    commit: str | None = None
    python: str = ""


class RunResult(BaseModel):
    status: Status
    stage: Stage | None = None
    message: str = ""
    signal: str | None = None
    stderr_tail: str = ""
    compile_s: float | None = None
    run_s: float | None = None
    wall_s: float = 0.0
    outputs: dict[str, NDArray] = Field(default_factory=dict)
    backend: BackendInfo | None = None
