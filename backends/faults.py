"""Test-only faults a worker can be told to inject: real crashes, real hangs, real
wrong outputs. They let the tests prove that the bot survives each failure mode
without mocking the failure.

The trigger is a hash of the model bytes, not a request counter, so a faulty case
stays faulty across worker restarts and re-runs, like a real bug.
"""

from __future__ import annotations

import ctypes
import os
import time
import zlib
from collections.abc import Mapping
from typing import Any, Required, TypedDict

import numpy as np

KINDS = ("segv", "abort", "hang", "perturb", "oom", "slow", "flaky", "corrupt", "poison", "raise")
SLOW_S = 0.05
"""The delay a `slow` fault adds to the run stage: far above the noise of a small model."""
OOM_CHUNK = 64 << 20


class FaultSpec(TypedDict, total=False):
    """A test fault as the bot hands it to a worker (the `fault` of its hello, as JSON):
    one of KINDS, on every `every`-th model by hash (default 1). The worker reads it into a
    plain dict of its own, where `flaky`, `corrupt` and `poison` keep their state."""

    kind: Required[str]
    every: int


def check(fault: Mapping[str, Any] | None, memory_mb: int | None) -> None:
    """Refuse a fault that would hurt the machine rather than the worker."""
    if fault and fault.get("kind") not in KINDS:
        raise ValueError(f"unknown test fault {fault.get('kind')!r}; valid: {', '.join(KINDS)}")
    if fault and fault.get("kind") == "oom" and not memory_mb:
        raise ValueError("the oom test fault needs a worker memory limit")


def triggered(fault: Mapping[str, Any] | None, model: bytes) -> bool:
    if not fault:
        return False
    every = max(1, int(fault.get("every", 1)))
    return zlib.crc32(model) % every == 0


def before_compile(fault: dict[str, Any] | None, model: bytes) -> None:
    if not triggered(fault, model):
        return
    assert fault is not None
    kind = fault["kind"]
    if kind == "segv":
        ctypes.string_at(0)  # a genuine SIGSEGV: reads address 0
    elif kind == "abort":
        os.abort()
    elif kind == "oom":  # a real blow-up: touched pages until the address-space cap refuses more
        hoard = []
        while True:
            hoard.append(np.ones(OOM_CHUNK, dtype=np.uint8))
    elif kind == "raise":  # an internal error the system raises on this model, every time
        raise RuntimeError("InternalError: Check failed: (lanes == 1) is false (test fault)")


def before_run(fault: dict[str, Any] | None, model: bytes) -> None:
    """A `slow` fault: a real performance regression in the run stage; a `hang`: a kernel that
    never returns (in the run stage, whose limit is the per-test timeout); a `poison`: the
    case it triggers on runs right but leaves the process failing every case after it, as a
    TVM case once left its worker raising "Check not null: ptr" until it was restarted.
    The state lives in this worker's copy of the settings, so a restart clears it."""
    if fault is not None and fault.get("poisoned"):
        raise RuntimeError("Check not null: ptr (test fault: an earlier case broke this worker)")
    if not triggered(fault, model) or fault is None:
        return
    if fault["kind"] == "poison":
        fault["poisoned"] = True
    if fault["kind"] == "slow":
        time.sleep(SLOW_S)
    elif fault["kind"] == "corrupt" and not _flaky_turn(fault):
        raise RuntimeError("heap corruption detected (test fault)")
    elif fault["kind"] == "hang":
        while True:
            time.sleep(60)


def _flaky_turn(fault: dict[str, Any]) -> bool:
    """A `flaky` fault perturbs every other run it triggers on: a side that disagrees with
    itself. A `corrupt` fault fails every run, by turns with wrong values and an error, as a
    corrupted heap does: a side that fails every run, each time differently.

    The count lives in this worker's own copy of the fault settings, so it survives
    between requests but not a restart, like the state behind a real flaky kernel.
    """
    runs = int(fault.get("runs", 0)) + 1
    fault["runs"] = runs
    return runs % 2 == 1


def after_run(fault: dict[str, Any] | None, model: bytes, outputs: dict[str, np.ndarray]) -> None:
    """Shift one element of the first float output well past any tolerance."""
    if not triggered(fault, model) or fault is None or fault["kind"] not in ("perturb", "flaky", "corrupt"):
        return
    if fault["kind"] == "flaky" and not _flaky_turn(fault):
        return
    for arr in outputs.values():
        if arr.dtype.kind == "f" and arr.size:
            flat = arr.reshape(-1)
            flat[0] = flat[0] + np.asarray(0.5 + abs(float(flat[0])), dtype=arr.dtype)
            return
    # No float output: flip a bool or step an integer, which exact comparison catches.
    for arr in outputs.values():
        if arr.size and arr.dtype.kind in "biu":
            flat = arr.reshape(-1)
            flat[0] = not flat[0] if arr.dtype.kind == "b" else flat[0] ^ 1
            return
