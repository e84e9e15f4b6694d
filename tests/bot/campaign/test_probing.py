"""Two builds probed at once (bot.campaign.probing): each on its own worker, head on a thread
of its own, the same answers and the same failures, in the same order, as one after the other."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from backends.client import WorkerClient
from backends.spec import parse_backend
from bot.campaign.probing import Asking, probe_at_once, probe_in_turn, probe_range
from bot.campaign.side_setup import SideSetup
from bot.campaign.triage import Side
from bot.cases.opsets import OpsetPlan
from bot.sides.probe import ProbeFailure, SupportMatrix

pytestmark = pytest.mark.worker

OPS = ["Add", "Sub", "Relu", "Abs", "Mod", "BitShift"]
OPSETS = [13, 14]


def _asking(cache: Path, lane: list[Side]) -> Asking:
    spec = parse_backend("onnxruntime:all")
    setups = [SideSetup(side.name, spec, sys.executable, build_id=side.name) for side in lane]
    return Asking(setups, lane, OPSETS, cache, {}, OPS)


def test_two_builds_asked_at_once_answer_and_fail_as_asked_in_turn(tmp_path: Path) -> None:
    """Head's worker segfaults on every third model: its probe failures are shown once both
    are done, in the order a probe in turn shows them, and every answer is the same. The
    progress bar counts both builds' pairs."""
    spec = parse_backend("onnxruntime:all")
    seen: dict[str, list[ProbeFailure]] = {}
    found: dict[str, list[dict[int, SupportMatrix]]] = {}
    progress: dict[str, list[tuple[int, int]]] = {"at_once": [], "in_turn": []}
    for way in ("at_once", "in_turn"):
        with (
            WorkerClient(spec) as base,
            WorkerClient(spec, fault={"kind": "segv", "every": 3}) as head,
        ):
            asking = _asking(tmp_path / way, [Side("base", base), Side("head", head)])
            failures, bar = seen.setdefault(way, []), progress[way]

            def show(done: int, total: int, bar: list[tuple[int, int]] = bar) -> None:
                bar.append((done, total))

            if way == "at_once":
                found[way] = probe_at_once(asking, failures.append, show)
            else:
                found[way] = probe_in_turn(asking, failures.append, show, None)
    assert seen["at_once"] and all(f.status == "crash" for f in seen["at_once"])
    assert seen["at_once"] == seen["in_turn"]
    assert found["at_once"] == found["in_turn"]
    one_build = max(t for _, t in progress["in_turn"])
    assert one_build > 0 and max(t for _, t in progress["at_once"]) == 2 * one_build, "the bar counts both builds"


def test_an_error_on_heads_thread_stops_base_and_is_raised_on_the_campaigns(tmp_path: Path) -> None:
    """A head whose worker cannot start: its error comes out of the probe, base stops before
    its next pair, and no probe thread is left behind."""
    spec = parse_backend("onnxruntime:all")
    asked: list[tuple[int, int]] = []
    with WorkerClient(spec) as base:
        head = WorkerClient(spec, python=str(tmp_path / "no-such-python"))
        asking = _asking(tmp_path, [Side("base", base), Side("head", head)])
        with pytest.raises(Exception, match="no-such-python"):
            probe_at_once(asking, lambda f: None, lambda d, t: asked.append((d, t)))
    assert not [t for t in threading.enumerate() if t.name == "fuzzbot-probe-head"]
    done, total = asked[-1] if asked else (0, 1)
    assert done < total, "base stopped before its last pair"


def test_the_plan_is_drawn_from_both_builds_answers_either_way(tmp_path: Path) -> None:
    """probe_range asks two builds at once where no diff lends head base's answers."""
    spec = parse_backend("onnxruntime:all")
    with WorkerClient(spec) as base, WorkerClient(spec) as head:
        lane = [Side("base", base), Side("head", head)]
        asking = _asking(tmp_path, lane)
        plan, matrices = probe_range(asking.setups, lane, OpsetPlan(13, 14), tmp_path, lambda f: None, None, {}, OPS)
    assert len(matrices) == 2 and set(matrices[0]) == set(OPSETS)
    assert plan.both is not None and set(plan.both[14]) == {op for op in OPS if matrices[0][14].supported.get(op)}
