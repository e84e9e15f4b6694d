"""A second opinion before a wrong result is believed.

fuzzbot's torch reference is its own code and can be wrong; `onnx.reference` is an
independent reading of the ONNX spec. A case where the two disagree is a question
about the spec or about fuzzbot, never a compiler bug, so it is logged as a
reference disagreement and not reported.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator
from pydantic import BaseModel

from oracles.compare import compare
from oracles.tolerances import Tolerance

RULE_ID = "reference-disagreement"
"""The count key suffix (`filtered:reference-disagreement`) of such cases."""


class ReferenceCheck(BaseModel):
    agree: bool
    detail: str = ""


def second_opinion(
    model: onnx.ModelProto,
    inputs: Mapping[str, np.ndarray],
    reference: Mapping[str, np.ndarray],
    per_output: Mapping[str, Tolerance] | None = None,
) -> ReferenceCheck:
    """Run `onnx.reference` and compare it with the torch reference at the case's bounds.

    An evaluator that cannot run the model gives no second opinion, and an unconfirmed
    wrong result is not believed either: it counts as a disagreement, with the reason.
    """
    try:
        evaluator = ReferenceEvaluator(model)
        names = [o.name for o in model.graph.output]
        values = evaluator.run(None, dict(inputs))
    except Exception as e:  # noqa: BLE001 - any evaluator failure means "no second opinion"
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return ReferenceCheck(agree=False, detail=f"onnx.reference failed: {type(e).__name__}: {first}"[:300])
    second = {n: np.asarray(v) for n, v in zip(names, values, strict=True)}
    comparison = compare(dict(reference), second, per_output=per_output)
    detail = "" if comparison.ok else f"onnx.reference: {comparison.summary()}"
    return ReferenceCheck(agree=comparison.ok, detail=detail)
