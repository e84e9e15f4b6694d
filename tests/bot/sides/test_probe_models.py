"""The probe's models are drawn once and asked of every build (bot.sides.probe_models): a
second build is asked the very same models, from the cache, without drawing any."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backends.client import WorkerClient
from backends.spec import parse_backend
from bot.sides import probe_models
from bot.sides.probe import probe_opsets
from bot.sides.probe_models import ProbeModel, ProbeModels
from generator.dtypes import DType
from generator.ops import registry

PAIRS = [
    ("Add", DType.float32),
    ("Add", DType.bfloat16),
    ("Add", DType.uint64),
    ("Where", DType.bool),
    ("Gather", DType.int8),
    ("Resize", DType.float16),
    ("Mod", DType.bfloat16),  # no seed writes it alone at 16: the answer is "none", kept too
    ("TopK", DType.uint32),
]


def _asked(models: ProbeModels, op: str, dtype: DType, opset: int, n: int = 3) -> list[ProbeModel]:
    found = []
    for model in models.asking(op, dtype, opset):
        found.append(model)
        if len(found) == n:
            break
    return found


def _no_drawing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError(f"drew a probe model again: {args}")

    monkeypatch.setattr(probe_models, "_draw", refuse)


def test_the_models_come_back_from_the_cache_byte_for_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every dtype the generator draws, bfloat16 and bool and the unsigned ones included,
    comes back with its type and bytes; and the order asked is the order drawn."""
    drawn = ProbeModels(tmp_path)
    first = {(op, d): _asked(drawn, op, d, 16) for op, d in PAIRS if d in registry()[op].dtypes}
    assert first[("Mod", DType.bfloat16)] == [] and sum(map(len, first.values())) >= len(first) + 2
    drawn.keep(16)
    _no_drawing(monkeypatch)
    again = ProbeModels(tmp_path)
    for (op, d), models in first.items():
        back = _asked(again, op, d, 16)
        assert [(m.model, m.ops, m.seed) for m in back] == [(m.model, m.ops, m.seed) for m in models], (op, d)
        for m, b in zip(models, back, strict=True):
            assert m.inputs.keys() == b.inputs.keys()
            for name, array in m.inputs.items():
                assert b.inputs[name].dtype == array.dtype and b.inputs[name].shape == array.shape, (op, d, name)
                assert b.inputs[name].tobytes() == array.tobytes(), (op, d, name)


def test_asking_for_more_than_was_drawn_goes_on_from_the_next_seed(tmp_path: Path) -> None:
    """A build that declines the first model is asked the next ones; the cache holds only what
    was asked before, and drawing goes on where it stopped, so the models are the ones an
    uncached probe asks."""
    one = ProbeModels(tmp_path)
    assert len(_asked(one, "Resize", DType.float32, 17, n=1)) == 1
    one.keep(17)
    more = _asked(ProbeModels(tmp_path), "Resize", DType.float32, 17)
    fresh = _asked(ProbeModels(None), "Resize", DType.float32, 17)
    assert [m.seed for m in more] == [m.seed for m in fresh] and len(fresh) == 3
    assert [m.model for m in more] == [m.model for m in fresh]


@pytest.mark.worker
def test_a_second_build_is_probed_without_drawing_and_gets_the_same_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Head after base: another build (here the same one under another id, so nothing of its
    matrix is cached) is asked every pair from the kept models, and answers as it did."""
    ops = ["Add", "Resize", "Mod", "Gather", "Where", "TopK", "Clip", "Cast", "Einsum", "STFT"]
    failures: list[object] = []
    with WorkerClient(parse_backend("onnxruntime:all")) as client:
        assert client.info is not None
        base = probe_opsets(client, client.info, [16, 17], tmp_path, failures.append, ops=ops, build_id="base")
        _no_drawing(monkeypatch)
        head = probe_opsets(client, client.info, [16, 17], tmp_path, failures.append, ops=ops, build_id="head")
    assert not failures
    for opset in (16, 17):
        assert head[opset].supported == base[opset].supported and head[opset].unsupported == base[opset].unsupported
    assert sum(len(v) for v in base[17].supported.values()) > 20
    assert (tmp_path / "probe-models").is_dir() and len(list((tmp_path / "support").glob("*.json"))) == 4
    assert np.all([DType.float32 in base[17].supported[op] for op in ("Add", "Resize", "Clip")])
