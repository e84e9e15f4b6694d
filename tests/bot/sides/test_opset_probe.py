"""The highest opset each build loads (bot.sides.opset_probe), asked of real onnxruntime
releases, and a two-build campaign that draws its cases' opsets up to the lower side's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from backends.client import WorkerClient
from backends.reference import model_opset
from backends.spec import parse_backend
from bot.sides.opset_probe import FLOOR, answer_path, ceiling_for, probe_opset
from bot.sides.probe import ProbeFailure, cache_path, probe_opsets
from generator.api import OLDEST_GENERATED
from generator.dtypes import DType
from generator.emit import NEWEST_OPSET
from tests import release_cases as rc
from tests.conftest import CliResult

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

OLD, NEW = "1.17.3", "1.31.1"
"""1.17.3 loads opset 20 (21 needs IR 10, which it does not know); 1.31.1 loads 26."""


def _python(version: str) -> str:
    return sys.executable if version == NEW else str(rc.ort_python(version))


@pytest.mark.parametrize(("version", "highest"), [(OLD, 20), (NEW, NEWEST_OPSET)])
def test_each_release_is_asked_by_bisection_and_answered_from_the_cache_after(
    tmp_path: Path, version: str, highest: int
) -> None:
    with WorkerClient(parse_backend("onnxruntime:all"), _python(version)) as client:
        assert client.info is not None and client.info.version == version
        ceiling = ceiling_for(client.handshake.get("opsets"))
        answer = probe_opset(client, client.info, tmp_path, ceiling)
        again = probe_opset(client, client.info, tmp_path, ceiling)
        lower = probe_opset(client, client.info, tmp_path, highest - 1)
    assert answer.highest == highest and not answer.cached
    assert answer.tried[highest] == "ok"
    assert highest == ceiling or not answer.tried[highest + 1].startswith("ok"), answer.tried
    assert len(answer.tried) <= 1 + (ceiling - FLOOR).bit_length(), "bisection, not a walk"
    assert again.cached and again.highest == highest and again.tried == answer.tried
    assert lower.highest == highest - 1 and not lower.cached, "another ceiling asks again"
    assert answer_path(tmp_path, client.info).is_file()


def _unexpected(failure: ProbeFailure) -> None:
    pytest.fail(f"unexpected probe failure: {failure}")


def test_support_is_probed_per_opset_where_a_kernel_comes_or_goes(tmp_path: Path) -> None:
    """onnxruntime 1.31.1 has no GlobalLpPool-22 kernel, and a float64 LeakyRelu-16 runs at 17
    only by its function body, which it no longer expands at 21: a matrix lent across opsets by
    op name alone would draw both where they are declined."""
    with WorkerClient(parse_backend("onnxruntime:all")) as client:
        assert client.info is not None
        found = probe_opsets(client, client.info, list(range(17, 23)), tmp_path, _unexpected)
        direct = probe_opsets(client, client.info, [22], tmp_path / "alone", _unexpected)[22]
    assert DType.float32 in found[21].supported["GlobalLpPool"]
    assert DType.float32 not in found[22].supported.get("GlobalLpPool", [])
    assert DType.float64 in found[17].supported["LeakyRelu"]
    assert DType.float64 not in found[21].supported.get("LeakyRelu", [])
    assert "BitwiseAnd" not in found[17].supported and DType.int32 in found[18].supported["BitwiseAnd"]
    lent = {op: set(dtypes) for op, dtypes in found[22].supported.items()}
    assert lent == {op: set(dtypes) for op, dtypes in direct.supported.items()}, "lent answers are the ones probed"
    assert all(cache_path(tmp_path, client.info, o).is_file() for o in range(17, 23))


@pytest.mark.timeout(600)  # two fresh releases probed at every opset of the range: minutes on a loaded machine
def test_a_two_release_campaign_draws_opsets_up_to_the_lower_sides_highest(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    config = rc.pair_config(tmp_path, OLD, NEW, reduce={"enabled": False})
    out = tmp_path / "out"
    r = cli("fuzz", "--config", str(config), "--max-tests", "80", "--seed", "0", "--out", str(out))
    assert r.code in (0, 2), r.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["base"]["highest_opset"] == 20 and summary["backend"]["highest_opset"] == NEWEST_OPSET
    drawn = {int(o): n for o, n in summary["coverage"]["opsets"].items()}
    assert set(drawn) <= set(range(OLDEST_GENERATED, 21)) and len(drawn) >= 3, drawn
    assert drawn.get(20, 0) >= 0.35 * sum(drawn.values()), "half the cases at the top of the range"
    assert summary["counts"].get("unsupported", 0) <= 2, summary["counts"]
    bundles = [p.parent for p in out.rglob("finding.json")]
    for bundle in bundles:
        opset = model_opset(onnx.load(str(bundle / "model.onnx")))
        assert opset <= 20 and json.loads((bundle / "finding.json").read_text())["generator"]["opset"] == opset
    matrices = [re.search(r"-opset(\d+)\.json$", p.name) for p in (tmp_path / "cache" / "support").iterdir()]
    assert {int(m[1]) for m in matrices if m} == set(range(OLDEST_GENERATED, 21)), "never asked beyond the range"
    assert bundles, "1.17.3 and 1.31.1 differ on some of 80 cases"
    _repro_loads_on_both(bundles[0])


def _repro_loads_on_both(bundle: Path) -> None:
    """The bundle's repro runs its model, at the opset it was drawn at, on either release:
    BUG or OK, never `CANNOT TELL` for a format the build cannot load."""
    for version in (OLD, NEW):
        ran = subprocess.run(
            [_python(version), "repro.py"], cwd=bundle, capture_output=True, text=True, timeout=120, check=False
        )
        assert ran.returncode in (0, 1), (version, ran.stdout, ran.stderr[-500:])
