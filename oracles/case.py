"""One case as the oracles see it: its reference, and every fact about it that judging
may need, each worked out once, on first need, and shared by every side's runs, the
false-positive rules and the tie-breaks.

Judging one run (`CaseEvidence.judge`) needs no reference for a crash, a hang or a compile
error. Values are compared with the reference (torch, else onnx.reference), at bounds
derived from where inexact arithmetic happens (oracles.tolerances), and where float16
arithmetic happens, within the envelope spanned by rounding each float16 intermediate,
keeping it in float32 and rounding every partial sum of a float16 accumulation
(oracles.accumulation), as backends legitimately do. On an input ONNX leaves undefined
(oracles.undefined) no value is wrong and an orderly error is an answer; only a dead
process or a hang still counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import onnx

from backends.reference import ReferenceError, run_reference
from backends.results import RunResult, Status
from generator.unwritten import RANDOM_OPS
from oracles.accumulation import stepwise_reading
from oracles.compare import Comparison, bad_mask, compare
from oracles.conditioning import SPREAD_FACTOR, rounding_spread
from oracles.matchers import CaseView
from oracles.provenance import HALF_WIDTHS, output_cones, rounding_widths
from oracles.references import Source, distance, float64_reference, onnx_reference, read_reference
from oracles.signature import op_signature
from oracles.tolerances import Tolerance, ToleranceConfig, tolerance_for
from oracles.undefined import undefined_inputs
from oracles.verdict import Judgement, Symptom, Verdict, judge

UNSTABLE_RATIO = 16.0
"""How much farther from the float64 re-run than the torch reference a backend must be, on
a case whose rounding alone exceeds its bounds, for its result to be a bug all the same."""

DISAGREEMENT = "reference-disagreement"
"""The rule id (count key `filtered:reference-disagreement`) of a wrong result the
independent readings do not confirm: a question about the spec or about fuzzbot's torch
reference, never a compiler bug."""

BEYOND_PRECISION = "beyond-precision"
"""The rule id of a wrong result on a case whose own rounding, as the float64 re-run shows,
already moves the reference beyond the case's bounds."""


UNCONFIRMED = "no second reading: torch stands"
"""The confirmation path of a wrong result that neither onnx.reference nor the float64 re-run
can compute: a missing reading is no evidence, so the finding stands on the torch reference
alone (counted in summary.json's tiebreaks, so the share is visible). A weight-quantization
regression in onnxruntime was set aside when a missing reading counted against it."""


@dataclass(frozen=True)
class Confirmation:
    """Whether a wrong result against the torch reference is believed, and what decided."""

    believed: bool
    path: str
    """How it was decided, counted in summary.json: `onnx.reference agrees`, or which side
    the float64 re-run took (`float64 sides with torch`, `... with onnx.reference`, `... with
    the backend`), `no float64 reading` (onnx.reference disagrees and nothing breaks the tie)
    or UNCONFIRMED (nothing but torch computes the case)."""
    detail: str = ""
    rule: str = DISAGREEMENT
    """The filter that sets an unbelieved case aside."""


class CaseEvidence:
    """A model, its inputs, its reference (None: nothing could compute it) and what judging
    it has needed so far."""

    def __init__(
        self,
        model: onnx.ModelProto,
        inputs: Mapping[str, np.ndarray],
        reference: Mapping[str, np.ndarray] | None,
        tolerances: ToleranceConfig | None = None,
        source: Source = Source.torch,
        gap: str = "",
    ) -> None:
        self.model = model
        self.inputs = dict(inputs)
        self.reference = None if reference is None else dict(reference)
        self.source = source if reference is not None else Source.none
        self.gap = gap
        """Why the torch reference could not compute the case, when it could not."""
        self.tolerances = tolerances or ToleranceConfig()
        self._bounds: dict[str | None, dict[str, Tolerance]] = {}
        self.warned: Counter[str] = Counter()
        """Warnings onnx.reference raised while judging the case (counted, never printed)."""

    @classmethod
    def compute(
        cls, model: onnx.ModelProto, inputs: Mapping[str, np.ndarray], tolerances: ToleranceConfig | None = None
    ) -> CaseEvidence:
        """The case with its reference computed (oracles.references.read_reference)."""
        reading = read_reference(model, inputs)
        return cls(model, inputs, reading.outputs, tolerances, reading.source, reading.gap)

    @cached_property
    def signature(self) -> str:
        return op_signature(self.model)

    @cached_property
    def random(self) -> frozenset[str]:
        """Outputs computed from a random op's values (generator.unwritten.RANDOM_OPS): no two
        runs or builds share them, and onnx.reference draws its own. `fuzzbot check` on a
        model with a RandomUniformLike reported its values as a wrong result."""
        if not any(n.op_type in RANDOM_OPS for n in self.model.graph.node):
            return frozenset()
        return frozenset(name for name, cone in output_cones(self.model).items() if cone.ops & RANDOM_OPS)

    @property
    def random_ops(self) -> set[str]:
        return {n.op_type for n in self.model.graph.node if n.op_type in RANDOM_OPS}

    @cached_property
    def undefined(self) -> list[str]:
        return undefined_inputs(self.model, self.inputs)

    @cached_property
    def rounds_in_float16(self) -> bool:
        return not HALF_WIDTHS.isdisjoint(rounding_widths(self.model).values())

    @cached_property
    def widened(self) -> dict[str, np.ndarray] | None:
        """The reference with float16 arithmetic kept in float32 (the envelope's other edge)."""
        if self.source is not Source.torch or not self.rounds_in_float16:
            return None
        try:
            return run_reference(self.model, self.inputs, widen_float16=True)
        except ReferenceError:
            return None

    @cached_property
    def stepwise(self) -> dict[str, np.ndarray] | None:
        """The reference with every float16 sum rounded step by step (oracles.accumulation)."""
        if self.source is not Source.torch or not self.rounds_in_float16:
            return None
        return stepwise_reading(self.model, self.inputs)

    @cached_property
    def envelope(self) -> dict[str, list[np.ndarray]] | None:
        """Per output, the readings besides the reference that a backend may legitimately
        land between: float16 kept wider, float16 sums rounded at every step (None where no
        float16 arithmetic happens)."""
        readings = [r for r in (self.widened, self.stepwise) if r is not None]
        if not readings:
            return None
        return {name: [r[name] for r in readings if name in r] for name in set().union(*readings)}

    @cached_property
    def onnx_reading(self) -> tuple[dict[str, np.ndarray] | None, str]:
        return onnx_reference(self.model, self.inputs, self.warned)

    @cached_property
    def float64(self) -> dict[str, np.ndarray] | None:
        return float64_reference(self.model, self.inputs)

    def bounds(self, backend: str | None) -> dict[str, Tolerance]:
        if backend not in self._bounds:
            self._bounds[backend] = self.tolerances.for_outputs(self.model, backend)
        return self._bounds[backend]

    def judge(self, result: RunResult, against: Mapping[str, np.ndarray] | None = None) -> Judgement:
        """One run's judgement. `against`: judge the values by these outputs (another
        build's, when no reference computes the case) instead of the reference."""
        backend = result.backend.name if result.backend else None
        if result.status in (Status.error, Status.crash, Status.timeout):
            return self._failure(judge(result, {}, self.signature))
        if result.status is not Status.ok:
            return judge(result, {}, self.signature)
        expected = against if against is not None else self.reference
        if expected is not None and self.random:
            expected = {name: v for name, v in expected.items() if name not in self.random}
            if not expected:
                ops = ", ".join(sorted(self.random_ops))
                return Judgement(verdict=Verdict.pass_, message=f"values not judged: every output is drawn by {ops}")
        if expected is None:
            return Judgement(verdict=Verdict.pass_, message="values not judged: no reference computes this case")
        bounds = self.bounds(backend)
        j = judge(result, expected, self.signature, per_output=bounds)
        if j.verdict is Verdict.wrong_result and against is None and self.envelope is not None:
            j = judge(result, expected, self.signature, per_output=bounds, envelope=self.envelope)
        if j.verdict is Verdict.wrong_result and self.undefined:
            return Judgement(
                verdict=Verdict.pass_,
                undefined=self.undefined[0],
                message=f"values not compared on an undefined input ({self.undefined[0]})",
            )
        j.judged_by = Source.base.value if against is not None else self.source.value
        if j.verdict is Verdict.wrong_result and j.comparison is not None:
            j.kernel = self._kernel(result, j.comparison)
        return j

    def _kernel(self, result: RunResult, comparison: Comparison) -> str:
        """The node type that computed the first wrong output, in the graph that ran."""
        wrong = sorted(o.name for o in comparison.outputs if o.mismatch)
        if not wrong:
            return ""
        if wrong[0] in result.kernels:
            return result.kernels[wrong[0]]
        node = next((n for n in self.model.graph.node if wrong[0] in n.output), None)
        return f"{node.domain or 'ai.onnx'}::{node.op_type}" if node is not None else ""

    def _failure(self, j: Judgement) -> Judgement:
        """A failure on an undefined input: an orderly error is an answer, a dead process or
        a hang is still one (and is marked, for the verdict across sides)."""
        if not self.undefined:
            return j
        if j.symptom == Symptom.exception:
            note = f"raised on an undefined input ({self.undefined[0]}): {j.message}"
            return Judgement(verdict=Verdict.pass_, stage=j.stage, undefined=self.undefined[0], message=note)
        return j.model_copy(update={"undefined": self.undefined[0]})

    def view(self, backend: str, judgement: Judgement, outputs: Mapping[str, np.ndarray] | None) -> CaseView:
        """What the false-positive rules see of one judged run."""
        return CaseView(
            backend=backend,
            model=self.model,
            inputs=self.inputs,
            judgement=judgement,
            outputs=outputs,
            reference=self.reference,
            bounds=self.bounds(backend),
            envelope=self.envelope if judgement.verdict is Verdict.wrong_result else None,
        )

    def confirm(self, judgement: Judgement, outputs: Mapping[str, np.ndarray]) -> Confirmation:
        """Whether a wrong result against the torch reference is believed. First, the float64
        re-run (independent of both references' rounding and of the system under test) must
        not show the case too ill-conditioned to judge at its precision; then onnx.reference
        must agree with torch, or else the float64 re-run must side with torch."""
        assert self.reference is not None
        bounds = self.bounds(None)
        wide = self.float64
        if wide is not None:
            found = self._against_float64(outputs, wide, bounds) or self._within_rounding(outputs, wide, bounds)
            if found is not None:
                return found
        second, why = self.onnx_reading
        if second is not None:
            agreement = compare(self.reference, second, per_output=bounds)
            if agreement.ok:
                return Confirmation(True, "onnx.reference agrees")
            why = f"onnx.reference: {agreement.summary()}"
        if wide is None and second is None:
            return Confirmation(True, UNCONFIRMED, f"{why}; the float64 re-run cannot compute the case")
        if wide is None:
            return Confirmation(False, "no float64 reading", f"{why}; the float64 re-run cannot compute the case")
        rival, name = (second, "onnx.reference") if second is not None else (dict(outputs), "the backend")
        mine, theirs = self._distances(rival, wide, bounds)
        detail = f"{why}; float64 re-run: torch {mine:.3g} off, {name} {theirs:.3g} off"
        if mine <= theirs:
            return Confirmation(True, "float64 sides with torch", detail)
        return Confirmation(False, f"float64 sides with {name}", detail)

    def _distances(
        self, rival: Mapping[str, np.ndarray], truth: Mapping[str, np.ndarray], bounds: Mapping[str, Tolerance]
    ) -> tuple[float, float]:
        """How far torch and `rival` are from `truth`, where the two disagree."""
        assert self.reference is not None
        mine = theirs = 0.0
        for out, want in self.reference.items():
            other, exact = rival.get(out), truth.get(out)
            if other is None or exact is None or other.shape != want.shape:
                continue
            tol = bounds.get(out) or tolerance_for(want.dtype)
            where = bad_mask(want, other, tol) if other.dtype == want.dtype else None
            mine += distance(want, exact, where)
            theirs += distance(other, exact, where)
        return mine, theirs

    def _within_rounding(
        self, outputs: Mapping[str, np.ndarray], truth: Mapping[str, np.ndarray], bounds: Mapping[str, Tolerance]
    ) -> Confirmation | None:
        """Is the backend, where it is wrong, within what rounding every operand once moves
        the float64 result (oracles.conditioning)? Then the case is too ill-conditioned for
        its dtype to tell a bug from rounding. None: the backend is beyond that bound."""
        assert self.reference is not None
        spread: dict[str, np.ndarray] | None = None
        checked = False
        for out, want in self.reference.items():
            got, exact = outputs.get(out), truth.get(out)
            if got is None or exact is None or not got.shape == want.shape == exact.shape or want.dtype.kind != "f":
                continue
            wrong = bad_mask(want, got, bounds.get(out) or tolerance_for(want.dtype))
            if not wrong.any():
                continue
            spread = spread if spread is not None else rounding_spread(self.model, self.inputs, truth)
            if spread is None or out not in spread:
                return None
            error = np.abs(got.astype(np.float64) - exact)[wrong]
            with np.errstate(over="ignore"):
                bound = SPREAD_FACTOR * spread[out][wrong]
            if not bool(np.all((error <= bound) | np.isinf(bound))):
                return None
            checked = True
        if not checked:
            return None
        detail = (
            "where the backend is wrong, moving every operand by one rounding moves the float64 result"
            f" as far (x{SPREAD_FACTOR:g})"
        )
        return Confirmation(False, "rounding alone moves the case that far", detail, BEYOND_PRECISION)

    def _against_float64(
        self, outputs: Mapping[str, np.ndarray], truth: Mapping[str, np.ndarray], bounds: Mapping[str, Tolerance]
    ) -> Confirmation | None:
        """Where the backend is wrong, is the torch reference itself beyond the bounds of the
        float64 re-run? Then the backend within them is right (the reference's rounding is
        the error), and a backend not far worse (UNSTABLE_RATIO) is as good: rounding alone
        moves the result that far (chained Tan, a Conv near a pole). None: torch holds."""
        assert self.reference is not None
        mine, theirs, drifted, backend_right = 0.0, 0.0, False, True
        for out, want in self.reference.items():
            got, exact = outputs.get(out), truth.get(out)
            if got is None or exact is None or not got.shape == want.shape == exact.shape or got.dtype != want.dtype:
                continue
            tol = bounds.get(out) or tolerance_for(want.dtype)
            wrong = bad_mask(want, got, tol)
            if not wrong.any():
                continue
            exact = exact.astype(want.dtype)
            drifted = drifted or bool((bad_mask(exact, want, tol) & wrong).any())
            backend_right = backend_right and not bool((bad_mask(exact, got, tol) & wrong).any())
            mine += distance(want, exact, wrong)
            theirs += distance(got, exact, wrong)
        detail = f"where the backend is wrong, the float64 re-run puts torch {mine:.3g} off, the backend {theirs:.3g}"
        if not drifted:
            return None
        if backend_right:
            return Confirmation(False, "float64 sides with the backend", detail)
        if theirs <= UNSTABLE_RATIO * mine:
            return Confirmation(False, "float64 shows the case beyond its precision", detail, BEYOND_PRECISION)
        return None
