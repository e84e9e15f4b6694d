"""What a campaign asks every side before the first case: the highest opset it loads, then
which op x dtype pairs it runs at each opset the campaign will draw.

The opset answer comes first because it bounds the range the support is probed over: a side
that loads 20 is never asked about 21 (it would refuse every such model, and say so in a way
that reads as "unsupported" for each op). Generation then draws, per case, from what every
side runs at that case's opset (bot.cases.opsets), and a share of the seeds from what one
side alone runs there, so a change that adds or drops support is seen.
"""

from __future__ import annotations

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
    line; head takes base's answers for the rest (bot.sides.probe.FromBase)."""
    matrices: list[dict[int, SupportMatrix]] = []
    from_base: FromBase | None = None
    for index, (setup, side) in enumerate(zip(setups, lane, strict=True)):
        info: BackendInfo = side.client.start()
        found = probe_opsets(
            side.client,
            info,
            list(plan.opsets),
            cache,
            on_failure,
            on_progress,
            ops=ops,
            lossy=lossy,
            build_id=setup.build_id,
            from_base=from_base,
        )
        matrices.append(found)
        if index == 0 and len(setups) == 2 and touched is not None:
            from_base = FromBase(cached_matrices(cache, info, list(plan.opsets), setup.build_id), touched)
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
    return OpsetPlan(
        plan.low, plan.high, both, own[1] or None, own[0] or None, alone[1] or None, alone[0] or None
    ), matrices


def plan_opsets(cfg: GenConfig, answers: list[OpsetAnswer | None] | None) -> OpsetPlan:
    """The campaign's range from the config and the sides' answers (bot.cases.opsets.campaign_range)."""
    loaded = None if answers is None else [a.highest if a is not None else None for a in answers]
    low, high = campaign_range(cfg, loaded)
    return OpsetPlan(low, high)
