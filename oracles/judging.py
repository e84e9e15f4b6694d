"""The one judging pipeline: how one run of one case becomes a judgement a maintainer can
trust, whoever asks (a campaign's triage, `fuzzbot check` and `run`, the regression replay,
the reducer's candidates and the dtype generalization).

A reducer that judged candidates with less than the campaign (the shipped rules only, no
user rules, default tolerances, no second reference) kept candidates the campaign would
have set aside, and drifted from a bug onto a false positive. So every caller holds one
`Judging`, built from the config's `oracles:` and `tolerances:` sections, and asks it:
the reference with its fallbacks, the float16 envelope, undefined inputs, the
false-positive rules (shipped and the user's), and the confirmation of a wrong result by
independent readings.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping

import numpy as np
import onnx

from backends.results import RunResult
from oracles.asking import Asking
from oracles.case import CaseEvidence
from oracles.config import OracleConfig
from oracles.references import Source
from oracles.rules import RuleSet, load_rules
from oracles.sides import SideName, SideRuns
from oracles.tolerances import ToleranceConfig
from oracles.verdict import Judgement, Verdict


class Judging:
    """Judges runs as the config says. Thread-safe: lanes share one and count into it."""

    def __init__(self, cfg: OracleConfig, tolerances: ToleranceConfig, rules: RuleSet | None = None) -> None:
        """No part has a default: a caller that judged with the shipped settings where the
        user's config said otherwise would drift from the campaign (`shipped()` says so
        where that is meant). `rules`: the config's files, read, when None."""
        self.cfg = cfg
        self.tolerances = tolerances
        self.rules = rules if rules is not None else load_rules(self.cfg.rules)
        self.tiebreaks: Counter[str] = Counter()
        """How each wrong result against torch was confirmed or set aside (summary.json)."""
        self.reference_warnings = 0
        """Warnings onnx.reference raised while confirming wrong results (summary.json)."""
        self._lock = threading.Lock()

    @classmethod
    def shipped(cls) -> Judging:
        """The shipped rules, tolerances and oracle settings: for a bundle given without a
        config (`fuzzbot reduce` of a finding folder) and for tests."""
        return cls(OracleConfig(), ToleranceConfig())

    @property
    def asking(self) -> Asking:
        """How often a run is asked again, and which answers settle it (oracles.asking): the
        config's k, so every part that asks a build again asks as the campaign did."""
        return Asking(self.cfg.reruns)

    def compute(self, model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> CaseEvidence:
        """A case's evidence with its reference computed, at the config's tolerances."""
        return CaseEvidence.compute(model, inputs, self.tolerances)

    def evidence(
        self,
        model: onnx.ModelProto,
        inputs: Mapping[str, np.ndarray],
        reference: Mapping[str, np.ndarray] | None,
        source: Source,
        gap: str = "",
    ) -> CaseEvidence:
        """A case's evidence with its reference already read (a generated case's)."""
        return CaseEvidence(model, inputs, reference, self.tolerances, source, gap)

    @staticmethod
    def judge(
        ev: CaseEvidence, result: RunResult, against: Mapping[str, np.ndarray] | None = None, side: str = SideName.head
    ) -> Judgement:
        """One run's judgement; `against`: base's outputs, head's reference when no reference
        computes the case (then base itself is not judged)."""
        if against is None:
            return ev.judge(result)
        if side == SideName.base:
            return Judgement(verdict=Verdict.pass_, judged_by=Source.base.value, message="the reference for head")
        return ev.judge(result, against=against)

    def explain(self, ev: CaseEvidence, side_runs: SideRuns, result: RunResult) -> None:
        """Set `side_runs.rule` when a false-positive rule explains its failure, or when the
        independent readings do not confirm a wrong result against torch."""
        j = side_runs.first
        if not j.verdict.is_bug:
            return
        backend = result.backend.name if result.backend else ""
        hit = self.rules.match(ev.view(backend, j, result.outputs))
        if hit is not None:
            side_runs.rule, side_runs.rule_detail = hit.rule_id, hit.explanation
        elif j.verdict is Verdict.wrong_result and j.judged_by == Source.torch and self.cfg.second_reference:
            self._confirm(ev, side_runs, result)

    def run(self, ev: CaseEvidence, result: RunResult, side: str = SideName.head.value) -> SideRuns:
        """One run, judged and explained: what a reduction candidate gets."""
        runs = SideRuns(side=side, runs=[self.judge(ev, result)])
        self.explain(ev, runs, result)
        return runs

    def _confirm(self, ev: CaseEvidence, side_runs: SideRuns, result: RunResult) -> None:
        """A wrong result against torch stands only with an independent second reading, or
        with none at all (a missing reading is no evidence: oracles.case.UNCONFIRMED)."""
        found = ev.confirm(side_runs.first, result.outputs)
        with self._lock:
            self.tiebreaks[found.path] += 1
            self.reference_warnings += ev.warned.total()
            ev.warned.clear()
        side_runs.rule_detail = f"{found.path}: {found.detail}" if found.detail else found.path
        if not found.believed:
            side_runs.rule = found.rule
