"""Real onnxruntime releases, side by side, through `fuzzbot check`: verdicts a maintainer
can trust on bugs that really appeared or went away between two consecutive releases
(tests/release_cases.py). Each release lives in its own cached venv (tests/venvs.py) and
is given to the config as a `python:` side, the way a CI job that built it earlier would.

One release pair per class of bug (a fusion regression, a fusion at `basic`, a kernel fix,
a crash and a value on an undefined input), so that a clean clone builds a few venvs; every
known flip between its own releases is bench/release_matrix.py's.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import yaml

from tests import release_cases as rc
from tests.conftest import CliResult

pytestmark = [pytest.mark.worker, pytest.mark.release]

Cli = Callable[..., CliResult]


def _check(cli: Cli, tmp: Path, case: rc.Case, base: str | None, head: str, level: str = "all") -> tuple[int, Any]:
    """`fuzzbot check --json` on one case, between two releases (or on `head` alone)."""
    model, inputs = case
    onnx.save(model, str(tmp / "case.onnx"))
    np.savez(tmp / "case.npz", **inputs)  # type: ignore[arg-type]
    config: dict[str, Any] = {"backend": f"onnxruntime:{level}", "cache_dir": str(tmp / "cache")}
    if base is None:
        config["python"] = str(rc.ort_python(head))
    else:
        sides = {"base": base, "head": head}
        config["compiler"] = {side: {"python": str(rc.ort_python(v))} for side, v in sides.items()}
    (tmp / "fuzzbot.yml").write_text(yaml.safe_dump(config))
    r = cli("check", "--config", str(tmp / "fuzzbot.yml"), "--json", str(tmp / "case.onnx"))
    assert r.code in (0, 2), r.err
    (found,) = json.loads(r.out)["cases"]
    return r.code, found


def test_a_real_regression_between_consecutive_releases_is_a_new_regression(cli: Cli, tmp_path: Path) -> None:
    """1.27.0's RMSNorm fusion drops a vector epsilon that 1.26.0 read."""
    right, wrong = rc.REGRESSION
    code, found = _check(cli, tmp_path, rc.rms_norm_vector_epsilon(), right, wrong)
    assert code == 2 and found["verdict"] == "new_regression", found
    assert found["sides"]["head"]["verdict"] == "wrong_result" and found["sides"]["head"]["judged_by"] == "torch"
    assert found["sides"]["base"]["build"].startswith(f"onnxruntime {right}")


def test_a_pad_folded_into_a_maxpool_is_a_new_regression_the_templates_found(cli: Cli, tmp_path: Path) -> None:
    """1.20.1's PadFusion folds a zero Pad into MaxPool's -inf padding (still in 1.31.1)."""
    right, wrong = rc.REGRESSION_PAD_FUSION
    code, found = _check(cli, tmp_path, rc.maxpool_after_zero_pad(), right, wrong)
    assert code == 2 and found["verdict"] == "new_regression", found
    assert found["sides"]["head"]["verdict"] == "wrong_result" and found["rule"] is None


def test_the_fused_normalization_with_pow_of_a_negative_base_is_a_regression_at_basic(cli: Cli, tmp_path: Path) -> None:
    """LayerNormFusion runs at `basic` from 1.20.1 and fuses `Sub(mean, x)` with the wrong
    sign; its `Pow(d, 2)` of a negative d must not make it look like instability."""
    right, wrong = rc.REGRESSION_BASIC
    code, found = _check(cli, tmp_path, rc.layernorm_pattern_sub_swapped(), right, wrong, level="basic")
    assert code == 2 and found["verdict"] == "new_regression", found
    assert found["rule"] is None and found["sides"]["head"]["rule"] is None


def test_a_process_killed_by_an_integer_division_by_zero_is_judged_without_a_reference(
    cli: Cli, tmp_path: Path
) -> None:
    """torch refuses integer division by zero, so the torch reference has no answer; the
    case still runs. 1.24.4 dies of SIGFPE, 1.25.1 raises: a fix, on an undefined input."""
    crashes, raises = rc.DIV_BY_ZERO_CRASHES[-1], rc.DIV_BY_ZERO_RAISES[0]
    code, found = _check(cli, tmp_path, rc.div_int32_by_zero(), crashes, raises)
    assert code == 0 and found["verdict"] == "fixed", found
    assert "undefined input" in found["note"] and "divisor != 0" in found["note"]
    assert found["sides"]["base"]["verdict"] == "crash" and "SIGFPE" in found["sides"]["base"]["message"]
    back_code, back = _check(cli, tmp_path, rc.div_int32_by_zero(), raises, crashes)
    assert back_code == 2 and back["verdict"] == "new_regression" and "undefined input" in back["note"]


def test_a_kernel_s_declared_limit_on_an_old_release_is_unsupported(cli: Cli, tmp_path: Path) -> None:
    """1.15.1's MeanVarianceNormalization refuses the axes it does not take, by name: a
    declared limit, never a crash report; a release that runs it computes it right."""
    code, found = _check(cli, tmp_path, rc.mvn_over_channels(), None, rc.MVN_AXES_DECLINED)
    assert code == 0 and found["verdict"] == "unsupported", found
    assert "only supports NHW and NCHW" in found["sides"]["head"]["message"]
    code, found = _check(cli, tmp_path, rc.mvn_over_channels(), None, "1.31.1")
    assert code == 0 and found["verdict"] == "pass", found


def test_a_schema_that_refuses_an_irfft_is_a_declared_limit_of_its_time(cli: Cli, tmp_path: Path) -> None:
    """1.17.3's DFT schema refuses `inverse` with `onesided`, a form the spec made clear only
    later: unsupported, not a crash report on every old pair; 1.31.1 computes it right."""
    code, found = _check(cli, tmp_path, rc.irfft(), None, rc.IRFFT_DECLINED)
    assert code == 0 and found["verdict"] == "unsupported", found
    assert "cannot be enabled at the same time" in found["sides"]["head"]["message"]
    code, found = _check(cli, tmp_path, rc.irfft(), None, "1.31.1")
    assert code == 0 and found["verdict"] == "pass", found


def test_a_crash_on_an_undefined_input_is_counted_never_reported(cli: Cli, tmp_path: Path) -> None:
    """One build that dies on a Mod by zero: its own verdict, and exit 0 (nothing reported);
    the build that raises instead has nothing wrong at all."""
    code, found = _check(cli, tmp_path, rc.mod_int64_by_zero(), None, rc.DIV_BY_ZERO_CRASHES[-1])
    assert code == 0 and found["verdict"] == "crash_on_undefined_input", found
    code, found = _check(cli, tmp_path, rc.mod_int64_by_zero(), None, rc.DIV_BY_ZERO_RAISES[0])
    assert code == 0 and found["verdict"] == "pass", found
    assert "raised on an undefined input" in found["sides"]["head"]["message"]


def test_a_value_difference_on_an_undefined_input_is_never_a_bug(cli: Cli, tmp_path: Path) -> None:
    """int32 ReduceSum whose sum does not fit: 1.26.0 wraps, 1.27.0 saturates. Overflow is
    undefined in ONNX, so the change is no regression (it was reported as one before)."""
    wraps, saturates = rc.FIX_REDUCEL2_INT32
    code, found = _check(cli, tmp_path, rc.reducesum_int32_overflow(), wraps, saturates)
    assert code == 0 and found["verdict"] == "pass", found
    assert "undefined input" in found["sides"]["head"]["message"]


def test_an_overflow_inside_a_kernel_whose_result_fits_is_a_real_fix(cli: Cli, tmp_path: Path) -> None:
    """int32 ReduceL2 of [30000, 40000] is exactly 50000, which fits: up to 1.26.0 the kernel
    wraps its sum of squares and returns INT32_MIN, a real bug that 1.27.0 fixed."""
    wrong, right = rc.FIX_REDUCEL2_INT32
    code, found = _check(cli, tmp_path, rc.reducel2_int32_overflow(), wrong, right)
    assert code == 0 and found["verdict"] == "fixed", found


LABEL_CASES = {
    "new_regression": (rc.rms_norm_vector_epsilon, rc.REGRESSION, (0, 1)),
    "fixed": (rc.reducel2_int32_overflow, rc.FIX_REDUCEL2_INT32, (1, 0)),
    "fixed on an undefined input": (
        rc.div_int32_by_zero,
        (rc.DIV_BY_ZERO_CRASHES[-1], rc.DIV_BY_ZERO_RAISES[0]),
        (1, 0),
    ),
    "persistent": (rc.layernorm_pattern_sub_swapped, rc.REGRESSION_RAISES, (1, 1)),
}
"""Each label's case and release pair (at `all`), and the repro's exit status on (base, head)."""


@pytest.mark.parametrize("label", sorted(LABEL_CASES))
def test_every_labels_repro_exits_as_each_build_behaves(cli: Cli, tmp_path: Path, label: str) -> None:
    """A repro exits 1 where the bug is and 0 where it is not, for every label, on both
    builds of a real release pair. A fixed division by zero once printed BUG on the build
    that fixed it: 1.25.1 raises "Integer division by zero", an answer on an undefined input."""
    make, (base, head), codes = LABEL_CASES[label]
    model, inputs = make()
    onnx.save(model, str(tmp_path / "case.onnx"))
    np.savez(tmp_path / "case.npz", **inputs)  # type: ignore[arg-type]
    config = rc.pair_config(tmp_path, base, head)
    out = tmp_path / "out"
    r = cli("check", "--config", str(config), "--out", str(out), str(tmp_path / "case.onnx"))
    assert r.code in (0, 2), r.err
    (bundle,) = (out / "findings").iterdir()
    assert bundle.name.startswith(label.split()[0]), bundle.name
    for version, code in zip((base, head), codes, strict=True):
        ran = subprocess.run(
            [str(rc.ort_python(version)), "repro.py"], cwd=bundle, capture_output=True, text=True, timeout=120
        )
        assert ran.returncode == code, (version, ran.stdout, ran.stderr[-500:])
        assert ran.stdout.startswith("BUG:" if code else "OK:"), ran.stdout
