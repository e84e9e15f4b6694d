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
    unsupported = "unsupported"
    """The system refused the model with one of its own "not supported" messages: a
    limitation it declares, never a bug."""


class Stage(StrEnum):
    import_ = "import"
    """The system's frontend reading the ONNX model (convert), where it has a separate one."""
    compile = "compile"
    run = "run"


class BackendInfo(BaseModel):
    """Which build produced a result, from the worker's handshake."""

    name: str
    level: str
    version: str
    commit: str | None = None
    python: str = ""
    """The worker interpreter's Python version."""
    executable: str = ""
    """The worker interpreter's path, so two venvs of one release stay apart."""
    protocol: int = 0
    highest_opset: int | None = None
    """The highest default-domain opset the build loads, as a campaign's probe found it
    (bot.sides.opset_probe); None where it was not asked."""


class RunResult(BaseModel):
    status: Status
    stage: Stage | None = None
    message: str = ""
    signal: str | None = None
    stderr_tail: str = ""
    import_s: float | None = None
    compile_s: float | None = None
    run_s: float | None = None
    wall_s: float = 0.0
    outputs: dict[str, NDArray] = Field(default_factory=dict)
    backend: BackendInfo | None = None
    kernels: dict[str, str] = Field(default_factory=dict)
    """Graph output -> `domain::Op` of the optimized graph's node that computed it (the
    kernel that ran), where the adapter reads it back; empty elsewhere."""
    earlier_requests: int = 0
    """Requests the worker process was sent before this one (0: a fresh process). A failure
    seen only after earlier ones may be state a case before it left behind."""
    rewrites: dict[str, int] = Field(default_factory=dict)
    """What the system's optimizer did to the model, read off its optimized graph after a
    good compile (generator.coverage.Coverage.rewrites has the keys); empty where the
    adapter exposes nothing."""
    arcs: dict[str, list[tuple[int, int]]] = Field(default_factory=dict, exclude=True)
    """The arcs of the system's own Python code this run executed first in its worker
    (backends.code_coverage), where the run was measured; empty elsewhere. Feedback only:
    never written into a bundle."""
