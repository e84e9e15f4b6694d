"""A reduced failure that only axes counted from the back show is named by that spelling
(bot.reduce.form_blame), whatever its symptom: onnxruntime 1.18.0's Resize, three ways."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.client import WorkerClient
from backends.reference import run_reference
from backends.results import BackendInfo
from backends.spec import parse_backend
from bot.findings.bundle import Finding, write_bundle
from bot.reduce.candidates import ClientPool
from bot.reduce.form_blame import name_guilty_form, positive_axes
from bot.reduce.reduced import Reduced
from oracles.judging import Judging
from oracles.verdict import Verdict, judge
from tests import release_cases as rc

pytestmark = [pytest.mark.worker, pytest.mark.release]

ORT = parse_backend("onnxruntime:all")


def _named(form: str, version: str, tmp: Path) -> tuple[Verdict, str]:
    model, inputs = rc.resize_over_negative_axes(form)
    pool = ClientPool(lambda: WorkerClient(ORT, str(rc.ort_python(version)), 30.0), 1)
    try:
        with pool.lend() as client:
            j = judge(client.run(model.SerializeToString(), inputs), run_reference(model, inputs), form)
        info = BackendInfo(name="onnxruntime", level="all", version=version)
        reduced = Reduced.load(write_bundle(tmp / form, model, inputs, None, Finding(**j.model_dump(), backend=info)))
        return j.verdict, name_guilty_form(reduced, pool, Judging.shipped())
    finally:
        pool.close()


@pytest.mark.parametrize("form", rc.RESIZE_FORMS)
def test_a_failure_only_negative_axes_show_is_named_by_them(form: str, tmp_path: Path) -> None:
    """A refusal at load, a refusal at run and a wrong shape: three checks or kernels, one
    name, since the same Resize with its axes written from the front runs right."""
    verdict, name = _named(form, rc.RESIZE_NEGATIVE_AXES, tmp_path)
    assert verdict is (Verdict.wrong_result if form == "wrong_shape" else Verdict.crash)
    assert name == "Resize with negative axes"


def test_axes_written_from_the_front_say_nothing_where_they_do_not_matter(tmp_path: Path) -> None:
    """1.31.1 runs the negative axes right: the form is asked only of a failure, and a model
    without negative axes is left as it is."""
    model, inputs = rc.resize_over_negative_axes("wrong_shape")
    spelled, ops = positive_axes(model, inputs)
    assert ops == {"Resize"} and list(spelled.graph.node[0].attribute[0].ints) == [1]
    again, none = positive_axes(spelled, inputs)
    assert none == set() and again is spelled
    verdict, name = _named("wrong_shape", "1.31.1", tmp_path)
    assert verdict is Verdict.pass_ and name == ""
