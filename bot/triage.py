"""From a first bad run to a verdict a maintainer can trust.

A candidate finding goes through, in order: the known-false-positive rules (cheap,
and a filtered case needs nothing more), the second reference (a wrong result the
two references cannot agree on is not believed), k runs on every side (a side that
disagrees with itself is flaky), the verdict table across sides, and localization at
the lowest level of each bad side's build. Only a case that survives all of it is
reported.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
import onnx

from backends.client import BackendUnavailable, WorkerClient
from backends.results import RunResult
from backends.spec import parse_backend
from oracles.config import OracleConfig
from oracles.rules import CaseView, RuleSet
from oracles.second_reference import RULE_ID as DISAGREEMENT
from oracles.second_reference import second_opinion
from oracles.sides import CrossJudgement, CrossVerdict, Localization, SideRuns, combine
from oracles.signature import op_signature
from oracles.tolerances import Tolerance, ToleranceConfig
from oracles.verdict import Judgement, Verdict, judge


class Case(Protocol):
    """What triage needs of a test case (the campaign's `Prepared` is one)."""

    model: onnx.ModelProto
    model_bytes: bytes
    inputs: dict[str, np.ndarray]
    reference: dict[str, np.ndarray]


@dataclass
class Side:
    """One build a case runs on, with a second worker at its lowest level, started on first need."""

    name: str
    client: WorkerClient
    lowest: WorkerClient | None = field(default=None, repr=False)

    def lowest_client(self) -> WorkerClient | None:
        """None when the side already runs at its lowest level."""
        level = self.client.lowest_level
        if level is None or level == self.client.level:
            return None
        if self.lowest is None:
            c = self.client
            spec = replace(c.spec, level=level)
            self.lowest = WorkerClient(spec, c.python, c.timeout_s, fault=c.fault, memory_mb=c.memory_mb)
        return self.lowest

    def close(self) -> None:
        if self.lowest is not None:
            self.lowest.close()


class TieBreaker:
    """A third opinion when the two references disagree: onnxruntime with every graph
    optimization off, in this interpreter's own env, started on first need.

    onnx.reference has known defects on common cases (MaxPool with pads, grouped
    ConvTranspose, LRN); without a tie-break every wrong result through those ops would
    be set aside. When plain onnxruntime agrees with the torch reference, two of three
    readings of the spec stand behind it and the finding is believed.
    """

    SPEC = "onnxruntime:disable"

    def __init__(self) -> None:
        self.client: WorkerClient | None = None
        self.unavailable = False
        self._lock = threading.Lock()  # one worker, shared by every lane of a campaign

    def agrees(self, case: Case, per_output: dict[str, Tolerance]) -> bool:
        with self._lock:
            return self._agrees(case, per_output)

    def _agrees(self, case: Case, per_output: dict[str, Tolerance]) -> bool:
        if self.unavailable:
            return False
        if self.client is None:
            self.client = WorkerClient(parse_backend(self.SPEC), sys.executable)
        try:
            result = self.client.run(case.model_bytes, case.inputs)
        except BackendUnavailable:
            self.unavailable = True
            return False
        return judge(result, case.reference, "", per_output=per_output).verdict is Verdict.pass_

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


class Triage:
    def __init__(
        self, cfg: OracleConfig, tolerances: ToleranceConfig, rules: RuleSet, tiebreak: TieBreaker | None = None
    ) -> None:
        self.cfg = cfg
        self.tolerances = tolerances
        self.rules = rules
        self.tiebreak = tiebreak

    def judge(self, case: Case, result: RunResult) -> Judgement:
        backend = result.backend.name if result.backend else None
        per_output = self.tolerances.for_outputs(case.model, backend)
        return judge(result, case.reference, op_signature(case.model), per_output=per_output)

    def triage(self, case: Case, sides: Sequence[Side], first: Sequence[RunResult]) -> CrossJudgement:
        """`sides` and `first` are in the order (base, head), or just (head,)."""
        runs = [SideRuns(side=s.name, runs=[self.judge(case, r)]) for s, r in zip(sides, first, strict=True)]
        if not any(r.first.verdict.is_bug for r in runs):
            return self._combine(runs)
        self._apply_rules(case, runs, first)
        if not any(r.bad for r in runs):
            return self._combine(runs)
        for side, side_runs in zip(sides, runs, strict=True):
            for _ in range(self.cfg.reruns - 1):
                side_runs.runs.append(self.judge(case, side.client.run(case.model_bytes, case.inputs)))
        verdict = self._combine(runs)
        if self.cfg.localize and verdict.verdict.is_reported:
            for side, side_runs in zip(sides, runs, strict=True):
                if side_runs.bad:
                    side_runs.localization = self.localize(case, side, side_runs.first)
        return verdict

    def _apply_rules(self, case: Case, runs: list[SideRuns], first: Sequence[RunResult]) -> None:
        for side_runs, result in zip(runs, first, strict=True):
            if not side_runs.first.verdict.is_bug:
                continue
            backend = result.backend.name if result.backend else ""
            view = CaseView(backend=backend, model=case.model, inputs=case.inputs, judgement=side_runs.first)
            hit = self.rules.match(view)
            if hit is not None:
                side_runs.rule, side_runs.rule_detail = hit.rule_id, hit.explanation
        wrong = [r for r in runs if r.bad and r.first.verdict is Verdict.wrong_result]
        if wrong and self.cfg.second_reference:
            per_output = self.tolerances.for_outputs(case.model, None)
            check = second_opinion(case.model, case.inputs, case.reference, per_output)
            if check.agree:
                return
            if self.tiebreak is not None and self.tiebreak.agrees(case, per_output):
                for r in wrong:
                    r.rule_detail = f"{check.detail}; {TieBreaker.SPEC} agrees with the torch reference"
                return
            for r in wrong:
                r.rule, r.rule_detail = DISAGREEMENT, check.detail

    def localize(self, case: Case, side: Side, bad: Judgement) -> Localization | None:
        client = side.lowest_client()
        if client is None:
            return None
        low = self.judge(case, client.run(case.model_bytes, case.inputs))
        return Localization(
            level=client.level,
            verdict=low.verdict,
            same_signature=low.verdict is bad.verdict and low.signature == bad.signature,
            depends_on_optimization=not low.verdict.is_bug,
        )

    @staticmethod
    def _combine(runs: list[SideRuns]) -> CrossJudgement:
        if len(runs) == 1:
            return combine(runs[0])
        return combine(runs[1], runs[0])


__all__ = ["Case", "CrossJudgement", "CrossVerdict", "Side", "TieBreaker", "Triage"]
