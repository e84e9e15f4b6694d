"""What a reported case leaves on disk: its bundle (model, inputs, expected outputs,
finding.json, repro.py) written before the findings store and summary.json name it, under
the one label its finding has; flaky and filtered cases kept apart."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from backends.reference import model_opset
from backends.results import RunResult
from backends.spec import BackendSpec
from bot.campaign.side_setup import SideSetup
from bot.campaign.state import CampaignState
from bot.cases.making import Prepared
from bot.config import FuzzConfig
from bot.errors import interrupts_deferred
from bot.findings.bundle import Finding, move_bundle, write_bundle
from bot.findings.records import DUPLICATES
from bot.findings.repro import render_repro
from bot.findings.store import FindingStore, relative_to_root
from bot.findings.summary import FindingRef, in_output, seen_union
from bot.reduce.campaign import CampaignReduction
from bot.reduce.finding import input_form
from generator.api import OLDEST_GENERATED, GenConfig
from generator.emit import NEWEST_OPSET
from oracles.count_keys import FILTERED_FOLDER, CountKey
from oracles.references import Source
from oracles.sides import CrossJudgement


class FindingKeeper:
    """Keeps the findings of one campaign, in the order its lanes report them, in the
    campaign's kept findings (`state.kept`); base's build, once started, is `state.base`.
    `count_key` is how the campaign counts a verdict (its symptom with one build, its label
    with two); `clock`, the seconds since the fuzzing started."""

    def __init__(
        self,
        cfg: FuzzConfig,
        setups: Sequence[SideSetup],
        state: CampaignState,
        store: FindingStore,
        reduction: CampaignReduction,
        count_key: Callable[[CrossJudgement], str],
        clock: Callable[[], float],
    ) -> None:
        self.cfg = cfg
        self.setups = setups
        self.state = state
        self.kept = state.kept
        self.store = store
        self.reduction = reduction
        self.count_key = count_key
        self.clock = clock

    def keep(
        self, case: Prepared, results: list[RunResult], cross: CrossJudgement, found_s: float | None = None
    ) -> FindingRef | None:
        """Kept whole or not at all: a signal waits for the bundle to be listed (bot.errors)."""
        with interrupts_deferred():
            return self._keep(case, results, cross, found_s)

    def _keep(
        self, case: Prepared, results: list[RunResult], cross: CrossJudgement, found_s: float | None
    ) -> FindingRef | None:
        """Write the bundle first, then the store: nothing is counted or shown before it is on disk.

        A finding has one label (oracles.sides.finding_label). A sighting under a stronger one
        than the finding's bundles show earns a bundle, and the weaker bundles go to
        duplicates/; a weaker sighting is counted, not kept (KeptFindings.superseded_by). A sighting
        under the first fingerprint of a finding already reduced is an occurrence of the bug
        its reduction named (CampaignReduction.occurrence). `found_s`: when it was first seen,
        for a suspect judged after the fuzzing (default: now)."""
        j = cross.failing.first
        finding = self._finding(case, results, cross)
        known = self.reduction.occurrence(j.fingerprint, cross.key)
        if known is not None:
            self.kept.seen(known.fingerprint)
            known.seen = seen_union(known.seen, [input_form(case.model)])
            named = finding.model_copy(update={"fingerprint": known.fingerprint, "signature": known.signature})
            self.store.record(named, None, shard=self.state.shard)
            return None
        self.kept.seen(j.fingerprint)
        superseded = self.kept.superseded_by(j.fingerprint, cross.key, self.cfg.keep_per_fingerprint)
        if superseded is None:
            self.store.record(finding, None, shard=self.state.shard)
            return None
        out = Path(self.cfg.out)
        dest = out / "findings" / f"{self.count_key(cross)}-{j.fingerprint}-seed{case.seed}"
        self._write(dest, case, cross, finding, results)
        self.store.record(finding, dest, shard=self.state.shard)
        for ref in superseded:
            self.kept.findings.remove(ref)
            move_bundle(in_output(out, ref.path), out / DUPLICATES / Path(ref.path).name)
        ref = FindingRef.of(
            finding,
            relative_to_root(dest, out),
            found_s=round(self.clock(), 3) if found_s is None else found_s,
            mutation=f"{case.mutation} (parent seed {case.parent})" if case.mutation else "",
            seen=[input_form(case.model)],
        )
        if case.regression_of is not None:  # already reduced: its own bundle is the reduced one
            ref.regression_of, ref.reduced_path = case.regression_of, ref.path
            ref.reduced_nodes = len(case.model.graph.node)
        self.kept.findings.append(ref)
        return ref

    def keep_aside(self, case: Prepared, results: list[RunResult], cross: CrossJudgement) -> None:
        """Flaky and (on request, `keep_filtered`) every other case set aside: filtered by a
        rule, declined by the build (unsupported), or crashing only on an undefined input.
        Saved apart, never listed as findings, so that each reason can be audited."""
        # flaky/ and filtered/<rule>/ are the count key's own folders; a case set aside for
        # what the build said (unsupported, an undefined input) is kept under its verdict
        where = CountKey(cross.key).aside_folder or f"{FILTERED_FOLDER}/{cross.verdict.value}"
        finding = self._finding(case, results, cross)
        with interrupts_deferred():
            self._write(Path(self.cfg.out) / where / f"seed{case.seed}", case, cross, finding, results)

    def _failing_index(self, cross: CrossJudgement) -> int:
        return [s.side for s in (cross.base, cross.head) if s is not None].index(cross.failing.side)

    def _spec(self, cross: CrossJudgement, results: list[RunResult]) -> BackendSpec:
        """The failing side's spec at the level the case ran at (bot.campaign.levels draws one per
        case), so the repro, the reduction and the bisection run there too."""
        index = self._failing_index(cross)
        spec, ran = self.setups[index].spec, results[index].backend
        return replace(spec, level=ran.level) if ran is not None and ran.level else spec

    def _write(
        self, dest: Path, case: Prepared, cross: CrossJudgement, finding: Finding, results: list[RunResult]
    ) -> None:
        """The bundle, with what the values were judged against as its expected outputs: the
        reference, or base's outputs where base was head's reference, or none for a crash."""
        spec = self._spec(cross, results)
        title = f"{cross.key} in {spec}: {finding.signature}"
        bounds = self.cfg.tolerances.for_outputs(case.model, finding.backend.name)
        expected = case.reference
        if expected is None and finding.judged_by == Source.base:
            expected = dict(results[0].outputs)
        repro = render_repro(case.model, case.inputs, expected or {}, spec, title, bounds, finding)
        write_bundle(dest, case.model, case.inputs, expected, finding, repro)

    def _generated_with(self, case: Prepared) -> GenConfig:
        """The generator config with the opset the case was drawn at (bot.cases.opsets): a
        campaign's config names a range, the case imports one."""
        gen, opset = self.cfg.generator, model_opset(case.model)
        if opset == gen.opset or not OLDEST_GENERATED <= opset <= NEWEST_OPSET:  # a user's model: any opset
            return gen
        return gen.model_copy(update={"opset": opset})

    def _finding(self, case: Prepared, results: list[RunResult], cross: CrossJudgement) -> Finding:
        result = results[self._failing_index(cross)]
        assert result.backend is not None
        side = cross.failing
        return Finding(
            **dict(side.first),
            backend=result.backend,
            base_backend=self.state.base,
            side=side.side,
            spec=str(self._spec(cross, results)),
            seed=case.seed,
            generator=self._generated_with(case),
            stderr_tail=result.stderr_tail,
            across=cross.key,
            runs=[j.verdict for j in side.runs],
            rule_detail=side.rule_detail,
            localization=side.localization,
            note=cross.note,
            base_failure=cross.base_failure,
        )
