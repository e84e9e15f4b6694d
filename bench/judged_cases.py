"""Precision and reports per root cause on a labelled set of real cases.

A campaign's own precision needs a person's triage; this is the part a script can keep
honest between changes. Every case below was triaged by hand against the spec and real
onnxruntime releases: real bugs carry their root cause, the others why they are not bugs
(an undefined input, a tie that rounding decides, a failure only a worker an earlier case
broke shows). They run as `fuzzbot check --config` runs them, through the whole pipeline
(re-runs, the fresh-worker check, rules, second references, the verdict table,
localization, reduction across the two builds and the final naming), on the real
releases of `--pair` (each in a cached venv, built on first use). Prints one JSON object:

- `cases`: each case's truth, verdict and report name (the final fingerprint);
- `precision`: reported cases that are real bugs, over reported cases;
- `recall`: real-bug cases reported, over real-bug cases;
- `reports_per_cause`: distinct reports among real-bug cases, over distinct root causes.

    python bench/judged_cases.py [--pair 1.22.1 1.23.2]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.campaign.sides import open_campaign
from bot.cases.making import Prepared
from bot.cases.user_cases import load_user_case
from bot.config import FuzzConfig
from tests import release_cases as rc

Case = tuple[onnx.ModelProto, dict[str, np.ndarray]]


def topk_of_tiny_sigmoids() -> Case:
    """onnxruntime's Sigmoid is 0 at -50 and -70, torch's 2e-22 and 4e-31: a tie TopK
    breaks another way, not a bug (a 1.22.1 to 1.23.2 campaign reported it)."""
    k = helper.make_tensor("k", TensorProto.INT64, [1], [3])
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("TopK", ["s", "k"], ["v", "i"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
        [
            helper.make_tensor_value_info("v", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("i", TensorProto.INT64, [3]),
        ],
        [k],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": np.array([-70, -50, -90, -88, -60, -100], np.float32)}


CASES: dict[str, tuple[Callable[[], Case], str | None]] = {
    "layernorm_single_element_axis": (rc.layernorm_single_element_axis, "layernorm-size-1-check"),
    "rms_norm_single_element_axis": (rc.rms_norm_single_element_axis, "layernorm-size-1-check"),
    "maxpool_after_zero_pad": (rc.maxpool_after_zero_pad, "pad-fusion-fill"),
    "layernorm_pattern_sub_swapped": (rc.layernorm_pattern_sub_swapped, "layernorm-fusion-sub-order"),
    "reducel2_int32_overflow": (rc.reducel2_int32_overflow, "reducel2-int32-accumulator"),
    "reducesum_int32_overflow": (rc.reducesum_int32_overflow, None),
    "div_int32_by_zero": (rc.div_int32_by_zero, None),
    "mod_int64_by_zero": (rc.mod_int64_by_zero, None),
    "topk_of_tiny_sigmoids": (topk_of_tiny_sigmoids, None),
}
"""name -> (the case, its root cause; None: not a bug)."""


def run(pair: tuple[str, str], where: Path) -> dict[str, Any]:
    cases: list[Prepared] = []
    for name, (make, _) in CASES.items():
        model, inputs = make()
        onnx.save(model, str(where / f"{name}.onnx"))
        np.savez(where / f"{name}.npz", **inputs)  # type: ignore[arg-type]
        cases.append(load_user_case(name, where / f"{name}.onnx"))
    compiler = {side: {"python": str(rc.ort_python(v))} for side, v in zip(("base", "head"), pair, strict=True)}
    cfg = FuzzConfig(out=where / "out", probe=False, backend="onnxruntime:all", compiler=compiler)
    campaign = open_campaign(cfg)
    judged = campaign.run_cases(cases, reduce=True)
    aliases = campaign.reduction.aliases
    rows = []
    for name, (cross, _) in zip(CASES, judged, strict=True):
        raw = cross.failing.first.fingerprint if cross.verdict.is_reported else ""
        report = aliases.get(raw, raw)
        rows.append({"case": name, "cause": CASES[name][1], "verdict": cross.key, "report": report})
    return score(rows)


def score(rows: list[dict[str, Any]]) -> dict[str, Any]:
    reported = [r for r in rows if r["report"]]
    real = [r for r in rows if r["cause"]]
    hits = [r for r in reported if r["cause"]]
    causes = {r["cause"] for r in hits}
    return {
        "cases": rows,
        "reported": len(reported),
        "precision": len(hits) / len(reported) if reported else None,
        "recall": len(hits) / len(real) if real else None,
        "causes": len(causes),
        "reports": len({r["report"] for r in hits}),
        "reports_per_cause": len({r["report"] for r in hits}) / len(causes) if causes else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", nargs=2, default=["1.22.1", "1.23.2"], metavar=("BASE", "HEAD"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(run((args.pair[0], args.pair[1]), Path(tmp)), indent=2))


if __name__ == "__main__":
    main()
