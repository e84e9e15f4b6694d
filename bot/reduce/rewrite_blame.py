"""Which one of the optimizer's rewrites a reduced failure needs: the bug's home.

Naming a bug by the kernel that computed it wrong (bot.reduce.blame) names one defect
once per kernel when the defect is a rewrite's missing precondition. onnxruntime's QDQ
selectors fuse DQ -> op -> Q into a QLinear kernel without checking that Q's scale is
per-tensor; a campaign met it through seven kernels (QLinearAdd, QLinearMul,
QLinearSigmoid, QLinearSoftmax, QLinearAveragePool, QLinearGlobalAveragePool,
QLinearMatMul), as a type error at load, a failed check at run time, or wrong values,
and filed seven reports. Turning off QDQSelectorActionTransformer alone makes every one
of them right, and that is the evidence that they are one bug.

So a reduced failure that needs the optimizer (its build's lowest level gets it right)
runs once more with the build logging which rewrites changed the graph, then once with
all of them off (where it must be right, or the failure is not theirs), then once with
each off in turn. The rewrite whose absence alone makes it right names the report. Where several
do (one prepares what the next fuses), the last to run is named: it made the graph that
fails. A build that cannot say which rewrites ran, or turn one off, keeps the kernel's
name.
"""

from __future__ import annotations

from backends.client import WorkerClient
from backends.results import RunResult
from backends.rewrite_log import one_rewrite, rewrites_that_changed
from backends.spec import BackendSpecError, adapter_class, parse_backend
from bot.findings.bundle import Bundle, Finding
from bot.reduce.reduced import Reduced
from bot.reduce.workers import SideRun
from oracles.judging import Judging
from oracles.verdict import Verdict


def needs_rewrite(finding: Finding) -> bool:
    """Whether a guilty rewrite is worth asking for: a wrong result or crash that its build's
    lowest level gets right, and not a death inside the optimizer (named by that pass
    already: backends.death)."""
    local = finding.localization
    if local is None or not local.depends_on_optimization:
        return False
    if finding.verdict not in (Verdict.wrong_result, Verdict.crash):
        return False
    return not finding.kernel.startswith("after ")


class Rewrites:
    """One case run on one side's build with some of its rewrites turned off, each run in a
    fresh worker (the options are the worker's), and judged by the campaign's pipeline."""

    def __init__(self, bundle: Bundle, side: SideRun, judging: Judging) -> None:
        self.side, self.judging = side, judging
        self.spec = parse_backend(side.spec)
        self.case = bundle
        self.ev = judging.compute(self.case.model, self.case.inputs)

    def run(self, options: dict[str, str]) -> tuple[RunResult, str]:
        """The run's result and what the worker logged."""
        client = WorkerClient(self.spec, self.side.python, self.side.timeout_s, options=options)
        try:
            return client.run(self.case.model.SerializeToString(), self.case.inputs), client.log()
        finally:
            client.close()

    def changed(self) -> list[str]:
        """The single rewrites that changed this case's graph, in the order they ran."""
        return [n for n in rewrites_that_changed(self.run({"trace": "1"})[1]) if one_rewrite(n)]

    def right_without(self, names: list[str]) -> bool:
        """Whether the build gets the case right with `names` turned off (never, when no
        reference computes it: a missing reference is no evidence)."""
        if self.ev.reference is None:
            return False
        result = self.run({"disable": "+".join(names)})[0]
        return self.judging.judge(self.ev, result).verdict is Verdict.pass_


def name_guilty_rewrite(reduced: Reduced, side: SideRun, judging: Judging) -> str:
    """The rewrite the reduced failure needs ("" when none alone is to blame, or the build
    cannot tell)."""
    if not needs_rewrite(reduced.finding) or not names_rewrites(side):
        return ""
    case = Rewrites(reduced.bundle, side, judging)
    changed = case.changed()
    if not changed or not case.right_without(changed):
        return ""
    alone = [n for n in changed if case.right_without([n])]
    return alone[-1] if alone else ""


def names_rewrites(side: SideRun) -> bool:
    """Whether the side's backend can log its rewrites and turn one off (the `trace` and
    `disable` options); a plugin's options are its own, unknown to the bot."""
    try:
        spec = parse_backend(side.spec)
    except BackendSpecError:
        return False
    if spec.plugin:
        return False
    return {"trace", "disable"} <= set(getattr(adapter_class(spec.adapter), "options", {}))
