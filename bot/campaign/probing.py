"""What a campaign asks every side before the first case: the highest opset it loads, then
which op x dtype pairs it runs at each opset the campaign will draw.

The opset answer comes first because it bounds the range the support is probed over: a side
that loads 20 is never asked about 21 (it would refuse every such model, and say so in a way
that reads as "unsupported" for each op). Generation then draws, per case, from what every
side runs at that case's opset (bot.cases.opsets), and a share of the seeds from what one
side alone runs there, so a change that adds or drops support is seen.

Two builds are asked at once, each on its own worker, unless head takes base's answers for
what its diff left alone (then it must wait for them): two pip releases or wheels that no
run probed before cost the slower build's probe, not the sum of both.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from backends.results import BackendInfo
from bot.campaign.side_setup import SideSetup
from bot.campaign.triage import Side
from bot.cases.opsets import OpsetPlan, campaign_range
from bot.findings.summary import SupportSummary
from bot.sides.opset_probe import OpsetAnswer, ceiling_for, probe_opset
from bot.sides.probe import (
    FromBase,
    ProbeFailure,
    SupportMatrix,
    beyond,
    cached_matrices,
    only_in,
    probe_opsets,
    shared_support,
)
from bot.sides.probe_models import ProbeModels
from generator.api import GenConfig, Support


@dataclass
class Probed:
    """What the sides said, and the plan generation follows from it."""

    plan: OpsetPlan
    answers: list[OpsetAnswer | None]
    """Per side (base, head or head alone): its opset answer; None where it was not asked."""
    matrices: list[dict[int, SupportMatrix]] = field(default_factory=list)
    """Per side, its support matrix at each opset of the range; empty without a support probe."""

    def top(self, index: int) -> SupportMatrix | None:
        """Side `index`'s matrix at the top of the range, where half the cases are drawn."""
        return self.matrices[index].get(self.plan.high) if self.matrices else None

    def support_summary(self, two_sided: bool, failures: list[ProbeFailure]) -> SupportSummary | None:
        """What summary.json says the sides run, at the top of the range; None unprobed."""
        head, base = self.top(-1), self.top(0)
        if head is None or base is None:
            return None
        both, head_only = shared_support([base, head] if two_sided else [head])
        return SupportSummary(
            supported=sum(len(v) for v in head.supported.values()),
            unsupported=head.declined(),
            unexpected=failures,
            head_only=head_only,
            base_only=only_in(base.support(), both) if two_sided else {},
            from_base=head.from_base if two_sided else 0,
        )


def loads_up_to(info: BackendInfo | None, answer: OpsetAnswer | None) -> BackendInfo | None:
    """A side's record with the highest opset its probe found it loads."""
    if info is None or answer is None:
        return info
    return info.model_copy(update={"highest_opset": answer.highest})


def ask_opsets(setups: Sequence[SideSetup], lane: Sequence[Side], cache: Path) -> list[OpsetAnswer | None]:
    """Each side's highest opset, bounded by what its adapter declares (a bound, not an answer:
    the probe model decides below it)."""
    answers: list[OpsetAnswer | None] = []
    for setup, side in zip(setups, lane, strict=True):
        info = side.client.start()
        ceiling = ceiling_for(side.client.handshake.get("opsets"))
        answers.append(probe_opset(side.client, info, cache, ceiling, setup.build_id))
    return answers


def probe_range(
    setups: Sequence[SideSetup],
    lane: Sequence[Side],
    plan: OpsetPlan,
    cache: Path,
    on_failure: Callable[[ProbeFailure], None],
    on_progress: Callable[[int, int], None] | None,
    lossy: dict[str, str],
    ops: list[str] | None = None,
    touched: frozenset[str] | None = None,
) -> tuple[OpsetPlan, list[dict[int, SupportMatrix]]]:
    """Every side's support at every opset of `plan`'s range, and the plan with what every
    side runs and what one side alone runs, per opset. `ops`: the config's own list, where
    it names one; the cache keeps what was asked, and a later campaign asks the rest.
    `touched`: the op types the change can have touched, where the diff accounts for every
    line; head takes base's answers for the rest (bot.sides.probe.FromBase), so it is asked
    after base. Without it, two builds are asked at once (`probe_at_once`)."""
    asking = Asking(setups, lane, list(plan.opsets), cache, lossy, ops)
    if len(setups) == 2 and touched is None:
        matrices = probe_at_once(asking, on_failure, on_progress)
    else:
        matrices = probe_in_turn(asking, on_failure, on_progress, touched)
    return _plan_from(plan, matrices), matrices


@dataclass(frozen=True)
class Asking:
    """What every side's probe is asked with."""

    setups: Sequence[SideSetup]
    lane: Sequence[Side]
    opsets: list[int]
    cache: Path
    lossy: dict[str, str]
    ops: list[str] | None

    def ask(
        self,
        index: int,
        on_failure: Callable[[ProbeFailure], None],
        on_progress: Callable[[int, int], None] | None,
        from_base: FromBase | None = None,
        asked: ProbeModels | None = None,
        stop: threading.Event | None = None,
    ) -> dict[int, SupportMatrix]:
        setup, side = self.setups[index], self.lane[index]
        info: BackendInfo = side.client.start()
        return probe_opsets(
            side.client,
            info,
            self.opsets,
            self.cache,
            on_failure,
            on_progress,
            ops=self.ops,
            lossy=self.lossy,
            build_id=setup.build_id,
            from_base=from_base,
            asked=asked,
            stop=stop,
        )


def probe_in_turn(
    asking: Asking,
    on_failure: Callable[[ProbeFailure], None],
    on_progress: Callable[[int, int], None] | None,
    touched: frozenset[str] | None,
) -> list[dict[int, SupportMatrix]]:
    """One side after the other; head lent base's answers for what `touched` leaves out."""
    matrices: list[dict[int, SupportMatrix]] = []
    from_base: FromBase | None = None
    for index, setup in enumerate(asking.setups):
        matrices.append(asking.ask(index, on_failure, on_progress, from_base=from_base))
        if index == 0 and len(asking.setups) == 2 and touched is not None:
            client = asking.lane[0].client
            info = client.info if client.info is not None else client.start()  # started: no restart for it
            from_base = FromBase(cached_matrices(asking.cache, info, asking.opsets, setup.build_id), touched)
    return matrices


def probe_at_once(
    asking: Asking, on_failure: Callable[[ProbeFailure], None], on_progress: Callable[[int, int], None] | None
) -> list[dict[int, SupportMatrix]]:
    """Base on this thread and head on one of its own. Each waits on its own worker, so two
    builds never seen before (two pip releases, two wheels) take the slower one's time, not
    both: a first TVM 0.26 -> 0.27 campaign asked each about 1,000 pairs, some 13 minutes a
    build. They share the probe's models (drawn once, under a lock: bot.sides.probe_models).
    What failed is shown once both are done, base's first, as a probe in turn shows it, so
    summary.json lists it in the same order. Either side's error stops the other before its
    next pair and is raised here; so is an interrupt."""
    models = ProbeModels(asking.cache)
    tally = _Tally(on_progress, len(asking.setups))
    failures: list[list[ProbeFailure]] = [[] for _ in asking.setups]
    found: list[dict[int, SupportMatrix]] = [{} for _ in asking.setups]
    stop = threading.Event()
    errors: list[BaseException] = []

    def ask(index: int) -> None:
        found[index] = asking.ask(index, failures[index].append, tally.of(index), asked=models, stop=stop)

    def head() -> None:
        try:
            ask(1)
        except BaseException as e:  # noqa: BLE001 - raised on the campaign's thread, below
            errors.append(e)
            stop.set()

    thread = threading.Thread(target=head, name="fuzzbot-probe-head", daemon=True)
    thread.start()
    try:
        ask(0)
    except BaseException:
        stop.set()
        raise
    finally:
        thread.join()
    if errors:
        raise errors[0]
    for side in failures:
        for failure in side:
            on_failure(failure)
    return found


class _Tally:
    """Two probes' progress as one bar: the pairs done and to ask, summed over the builds."""

    def __init__(self, show: Callable[[int, int], None] | None, sides: int) -> None:
        self.show = show
        self.counts = [(0, 0)] * sides
        self.lock = threading.Lock()

    def of(self, index: int) -> Callable[[int, int], None] | None:
        show = self.show
        if show is None:
            return None

        def update(done: int, total: int) -> None:
            with self.lock:
                self.counts[index] = (done, total)
                show(sum(d for d, _ in self.counts), sum(t for _, t in self.counts))

        return update


def _plan_from(plan: OpsetPlan, matrices: list[dict[int, SupportMatrix]]) -> OpsetPlan:
    """`plan` with what every side runs, and what one side alone runs, at each opset."""
    both: dict[int, Support] = {}
    own: tuple[dict[int, Support], dict[int, Support]] = ({}, {})
    alone: tuple[dict[int, Support], dict[int, Support]] = ({}, {})
    for opset in plan.opsets:
        at = [m[opset] for m in matrices]
        both[opset], _ = shared_support(at)
        if len(at) < 2:
            continue
        for index, matrix in enumerate(at):  # 0: base, 1: head
            if extra := beyond(matrix.support(), both[opset]):
                own[index][opset], alone[index][opset] = matrix.support(), extra
    return OpsetPlan(plan.low, plan.high, both, own[1] or None, own[0] or None, alone[1] or None, alone[0] or None)


def plan_opsets(cfg: GenConfig, answers: list[OpsetAnswer | None] | None) -> OpsetPlan:
    """The campaign's range from the config and the sides' answers (bot.cases.opsets.campaign_range)."""
    loaded = None if answers is None else [a.highest if a is not None else None for a in answers]
    low, high = campaign_range(cfg, loaded)
    return OpsetPlan(low, high)
