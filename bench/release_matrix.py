"""Every known onnxruntime flip between releases, judged by `fuzzbot check` between the releases
it flips at: the release matrix.

tests/oracles/test_release_pairs.py keeps one release pair per class of bug (a fusion regression, a
kernel fix, a crash on an undefined input, ...), so that `make test` builds a few release
venvs, not every one. This bench runs the whole table of tests/release_cases.py: each case
between the two releases it changes at, at the level where it does, in cached venvs
(tests/venvs.py; the first run builds them, about half a minute each).

Prints JSON: per row the case, the releases, the level, the verdict expected and the one
`fuzzbot check --json` gave, each side's own verdict, and the seconds; then how many rows
held. Exits 1 when a row does not hold (a release's venv that cannot be built counts as not
holding, with the reason).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import yaml

from tests import release_cases as rc


@dataclass(frozen=True)
class Row:
    case: Callable[[], rc.Case]
    base: str
    head: str
    expected: str
    level: str = "all"


ROWS: tuple[Row, ...] = (
    Row(rc.rms_norm_vector_epsilon, *rc.REGRESSION, "new_regression"),
    Row(rc.rms_norm_axis_not_last, *rc.FIX, "fixed"),
    Row(rc.rms_norm_epsilon_first, *rc.FIX_EPSILON_FIRST, "fixed"),
    Row(rc.reducel2_int32_overflow, *rc.FIX_REDUCEL2_INT32, "fixed"),
    Row(rc.reducesum_int32_overflow, *rc.FIX_REDUCEL2_INT32, "pass"),
    Row(rc.layernorm_single_element_axis, *rc.REGRESSION_RAISES, "new_regression"),
    Row(rc.layernorm_single_element_axis, *rc.FIX_LAYERNORM_SINGLE_ELEMENT, "fixed"),
    Row(rc.layernorm_pattern_sub_swapped, *rc.REGRESSION_BASIC, "new_regression", "basic"),
    Row(rc.layernorm_pattern_sub_swapped, *rc.NORM_POW_MISCOMPILE, "persistent"),
    Row(rc.maxpool_after_zero_pad, *rc.REGRESSION_PAD_FUSION, "new_regression"),
    Row(rc.clip_fp16_min_only, *rc.REGRESSION_CLIP_FP16, "new_regression"),
    Row(rc.clip_fp16_min_only, *rc.FIX_CLIP_FP16, "fixed"),
    Row(rc.div_int32_by_zero, rc.DIV_BY_ZERO_CRASHES[-1], rc.DIV_BY_ZERO_RAISES[0], "fixed"),
    Row(rc.div_int32_by_zero, rc.DIV_BY_ZERO_RAISES[0], rc.DIV_BY_ZERO_CRASHES[-1], "new_regression"),
    Row(rc.mod_int64_by_zero, rc.DIV_BY_ZERO_CRASHES[-1], rc.DIV_BY_ZERO_RAISES[0], "fixed"),
    Row(rc.average_pool_after_zero_pad_explicit_pads, *rc.REGRESSION_PAD_AVGPOOL_EXPLICIT, "new_regression"),
    Row(rc.average_pool_after_zero_pad, *rc.REGRESSION_PAD_FUSION, "new_regression"),
    Row(rc.dequantize_slice_read_by_branches, *rc.REGRESSION_DQ_SLICE_IF, "new_regression"),
    Row(rc.dequantize_int8_reshape, *rc.REGRESSION_DQ_RESHAPE, "new_regression"),
    Row(rc.dequantize_int8_reshape, *rc.FIX_DQ_RESHAPE, "fixed"),
    Row(rc.quantize_4bit_maxpool, *rc.REGRESSION_Q4_MAXPOOL, "new_regression"),
    Row(rc.layernorm_pattern_pow_zero_float16, *rc.REGRESSION_NORM_FP16, "new_regression"),
)
"""Each flip with the verdict across its two releases (base, head). The first and last
release that crash on an integer division by zero stand for the others."""


def _check(row: Row, tmp: Path, timeout_s: float) -> dict[str, Any]:
    model, inputs = row.case()
    onnx.save(model, str(tmp / "case.onnx"))
    np.savez(tmp / "case.npz", **inputs)  # type: ignore[arg-type]
    sides = {"base": row.base, "head": row.head}
    config = {
        "backend": f"onnxruntime:{row.level}",
        "cache_dir": str(tmp / "cache"),
        "compiler": {side: {"python": str(rc.ort_python(v))} for side, v in sides.items()},
    }
    (tmp / "fuzzbot.yml").write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "bot.cli", "check", "--config", str(tmp / "fuzzbot.yml"), "--json"]
    done = subprocess.run([*command, str(tmp / "case.onnx")], capture_output=True, text=True, timeout=timeout_s)
    if done.returncode not in (0, 2):
        return {"verdict": None, "error": done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]}
    (found,) = json.loads(done.stdout)["cases"]
    return {"verdict": found["verdict"], "sides": {s: v["verdict"] for s, v in found["sides"].items()}}


def run_row(row: Row, timeout_s: float) -> dict[str, Any]:
    began = time.monotonic()
    result: dict[str, Any] = {
        "case": row.case.__name__,
        "base": row.base,
        "head": row.head,
        "level": row.level,
        "expected": row.expected,
    }
    with tempfile.TemporaryDirectory(prefix="release-matrix-") as tmp:
        try:
            result |= _check(row, Path(tmp), timeout_s)
        except (subprocess.SubprocessError, OSError) as e:  # a venv pip could not build, a hang
            result |= {"verdict": None, "error": f"{type(e).__name__}: {e}"}
    result["holds"] = result["verdict"] == row.expected
    result["seconds"] = round(time.monotonic() - began, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="rows whose case name contains this")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per `fuzzbot check`")
    args = parser.parse_args(argv)
    rows = [r for r in ROWS if args.only is None or args.only in r.case.__name__]
    results = [run_row(row, args.timeout) for row in rows]
    venvs = sorted({v for r in rows for v in (r.base, r.head)}, key=lambda v: tuple(map(int, v.split("."))))
    held = sum(r["holds"] for r in results)
    print(json.dumps({"rows": results, "held": held, "of": len(results), "releases": venvs}, indent=2))
    return 0 if held == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
