"""One definition of "the same bug", asked at four distances (oracles.bug_identity): where the
answers differ, each difference is one the bot relies on."""

from __future__ import annotations

import pytest

from backends.results import BackendInfo
from bot.findings.bundle import Finding
from oracles.bug_identity import Distance, as_sighting_of, kernel_fingerprint, same_bug, similar_messages
from oracles.verdict import Judgement, Verdict

RUN, BUILD, COMMIT = Distance.run, Distance.build, Distance.commit


def _crash(message: str, symptom: str = "exception", stage: str = "run", signature: str = "") -> Judgement:
    return Judgement(verdict=Verdict.crash, stage=stage, symptom=symptom, message=message, signature=signature)


def _wrong(symptom: str, signature: str = "values in Mul") -> Judgement:
    return Judgement(verdict=Verdict.wrong_result, stage="run", symptom=symptom, signature=signature)


CHECK = _crash(
    "Non-zero status code returned while running Gather node. indices element out of data bounds, idx=7",
    signature="indices element out of data bounds in Gather",
)


@pytest.mark.parametrize(
    ("j", "run", "build", "commit"),
    [
        # another verdict is another bug at every distance
        (_wrong("values"), False, False, False),
        # the same check with other numbers: the same bug everywhere (its signature too)
        (CHECK.model_copy(update={"message": CHECK.message.replace("7", "12")}), True, True, True),
        # another release's wording of a check at the same stage: the other build's answer only
        (
            _crash("Gather: index 7 is out of range for axis 0 of size 3", signature="index out of range"),
            False,
            True,
            False,
        ),
        # the same check at another stage: another bug on either build; a commit keeps the signature
        (CHECK.model_copy(update={"stage": "compile"}), False, False, True),
    ],
)
def test_an_exception_at_each_distance(j: Judgement, run: bool, build: bool, commit: bool) -> None:
    answers = (same_bug(CHECK, j, RUN), same_bug(CHECK, j, BUILD), same_bug(CHECK, j, COMMIT))
    assert answers == (run, build, commit)


def test_a_wrong_result_keeps_its_kinds_of_mismatch_on_its_build_and_any_kind_on_the_other() -> None:
    """A candidate that adds a kind (shape where values differed) drifted onto another bug;
    one that keeps a subset is the same. The other build of a persistent bug only has to be
    wrong; a commit of a bisection keeps the exact kind."""
    original = _wrong("values+nan")
    assert same_bug(original, _wrong("values"), RUN)
    assert not same_bug(original, _wrong("values+shape"), RUN)
    assert same_bug(original, _wrong("shape"), BUILD)
    assert not same_bug(original, _wrong("values"), COMMIT)
    assert same_bug(original, _wrong("values+nan", signature="another"), COMMIT)


def test_a_death_is_known_by_its_kind_and_memory_corruption_by_any_signal() -> None:
    """onnxruntime 1.25.1's stack smash dies by SIGABRT or SIGSEGV: one memory fault. A plain
    abort, or an orderly exception, is another failure."""
    segv = _crash("worker killed by SIGSEGV", symptom="signal SIGSEGV", signature="memory fault in Gather")
    smash = _crash("worker killed by SIGABRT: *** stack smashing detected ***", symptom="signal SIGABRT")
    abort = _crash("worker killed by SIGABRT", symptom="signal SIGABRT")
    assert same_bug(segv, smash, RUN) and same_bug(segv, smash, COMMIT)
    assert not same_bug(segv, abort, RUN) and not same_bug(segv, abort, COMMIT)
    assert not same_bug(segv, _crash("x", signature="signal SIGSEGV"), COMMIT)
    assert not same_bug(segv, smash, BUILD), "the other build must die by the same signal"


def test_messages_are_similar_past_names_and_numbers_not_past_wording() -> None:
    assert similar_messages(
        "shape (2,3) and (4,5) not aligned in node MatMul_0", "shape (7,1) and (4,) not aligned in node MatMul_12"
    )
    assert not similar_messages("shape (2,3) and (4,5) not aligned", "division by zero")


def _wrong_at(kernel: str, symptom: str = "values", ops: str = "Add,Conv,Relu") -> Judgement:
    """An unreduced wrong result, named as judging names it: by its model's op list."""
    j = _wrong(symptom, signature=f"{symptom} in {ops}")
    fp = f"fp of {symptom} in {ops}"
    return j.model_copy(update={"kernel": kernel, "fingerprint": fp})


def test_a_mutant_shows_its_parents_wrong_result_only_through_the_same_kernel() -> None:
    """One mutation step moves the op list, which names an unreduced wrong result, and leaves
    the kernel that computed the first wrong output where the step did not touch it."""
    parent = _wrong_at("ai.onnx::LayerNormalization", "values+nan")
    assert same_bug(parent, _wrong_at("ai.onnx::LayerNormalization", "values", ops="Add,Max,Range"), Distance.mutant)
    assert not same_bug(parent, _wrong_at("ai.onnx::Softmax", "values"), Distance.mutant)
    assert not same_bug(parent, _wrong_at("ai.onnx::LayerNormalization", "values+shape"), Distance.mutant)
    assert not same_bug(_wrong_at(""), _wrong_at(""), Distance.mutant), "no kernel named: no evidence"
    assert same_bug(CHECK, CHECK.model_copy(update={"message": CHECK.message.replace("7", "9")}), Distance.mutant)


def test_a_mutant_that_shows_its_parents_bug_is_named_as_its_parent_and_another_keeps_its_name() -> None:
    crash = CHECK.model_copy(update={"fingerprint": "the check's"})
    parent = _wrong_at("ai.onnx::LayerNormalization")
    shown = (crash, parent)
    again = _wrong_at("ai.onnx::LayerNormalization", ops="Add,Max,Pow,ReduceMean")
    named = as_sighting_of(shown, again)
    assert (named.fingerprint, named.signature) == (parent.fingerprint, parent.signature)
    assert named.kernel == again.kernel and named.message == again.message
    other = _wrong_at("ai.onnx::Softmax", ops="Add,Softmax")
    assert as_sighting_of(shown, other) == other
    assert as_sighting_of((), again) == again
    passed = Judgement(verdict=Verdict.pass_)
    assert as_sighting_of(shown, passed) is passed


def _blamed(name: str, label: str = "fixed") -> str:
    tvm = BackendInfo(name="tvm", level="default", version="0.26.0")
    return kernel_fingerprint(Finding(**_wrong("values").model_dump(), backend=tvm, blamed=name), label)


def test_wrong_numbers_at_one_kernel_are_one_bug_whether_or_not_they_are_nan() -> None:
    """TVM 0.26's GatherElements at a negative index reads out of bounds: its garbage was NaN
    in one reduced trigger and finite in another, one bug."""
    values = _blamed("values at ai.onnx::GatherElements")
    assert _blamed("nonfinite at ai.onnx::GatherElements") == values
    assert _blamed("nonfinite+values at ai.onnx::GatherElements") == values
    assert _blamed("shape at ai.onnx::GatherElements") != values, "a wrong shape is a kind of its own"
    assert _blamed("nonfinite at ai.onnx::Gather") != values, "another kernel"
    assert _blamed("nonfinite at ai.onnx::GatherElements", "persistent") != values, "another label"
