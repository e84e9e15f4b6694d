"""How new an ONNX each build loads: the highest default-domain opset at which a one-node
model runs on it.

A build refuses every model that imports an opset it does not know, whatever ops the model
holds, so a campaign that wrote one would only count declined models. Each side is asked
before any case is drawn, through its own worker (the real build, not a table of releases:
onnxruntime 1.15 loads 19, 1.18 loads 21, 1.21 loads 22, 1.25 and later 26, and a build
from a branch loads what its branch does). The model carries the IR version the generator
writes at that opset (generator.emit.IR_VERSION): a build that knows the opset but not the
IR version refuses the cases just the same.

Loading is monotone in the opset (a build that knows opset n knows every older one), so the
answer is found by bisection: the ceiling first, since a current build loads all the
generator writes, then halving. The answer is cached per build beside its support matrices,
valid for the floor and ceiling it was searched between: a fuzzbot that writes newer opsets,
or an adapter that declares another bound, asks again.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper
from pydantic import BaseModel, Field

from backends.client import WorkerClient
from backends.results import BackendInfo, Status
from bot.files import write_whole
from bot.sides.probe import build_stem
from generator.emit import IR_VERSION, NEWEST_OPSET

FLOOR = min(IR_VERSION)
"""The oldest opset the generator writes: the search never goes below it."""


class OpsetAnswer(BaseModel):
    """What a build said about the opsets between `floor` and `ceiling`."""

    floor: int
    ceiling: int
    highest: int | None
    """The highest opset in [floor, ceiling] whose model ran; None: none of those tried ran."""
    tried: dict[int, str] = Field(default_factory=dict)
    """opset -> `ok`, or the first line of why the model did not run."""
    seconds: float = 0.0
    """How long the probe took (0 when the answer came from the cache)."""
    cached: bool = False


def probe_model(opset: int) -> tuple[bytes, dict[str, np.ndarray]]:
    """One Add node, which every opset from 7 on holds unchanged since 14: whether it runs
    depends on the opset the model imports and its IR version alone."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "opset_probe", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION[opset])
    return model.SerializeToString(), {"x": np.asarray([1.0, -2.0], np.float32)}


def ceiling_for(declared: object) -> int:
    """The newest opset worth asking a build about: the generator's newest, or less where its
    adapter declares a lower highest opset (the handshake's `opsets`, [lowest, highest])."""
    if isinstance(declared, (list, tuple)) and len(declared) == 2 and all(isinstance(v, int) for v in declared):
        return max(FLOOR, min(NEWEST_OPSET, int(declared[1])))
    return NEWEST_OPSET


def _loads(client: WorkerClient, opset: int, tried: dict[int, str]) -> bool:
    model, inputs = probe_model(opset)
    client.submit(model, inputs)
    result = client.collect()
    if result.status is Status.ok:
        tried[opset] = "ok"
        return True
    why = (result.message or result.signal or result.status.value).strip().splitlines()
    tried[opset] = f"{result.status.value}: {why[0][:200] if why else ''}"
    return False


def highest_opset(client: WorkerClient, floor: int = FLOOR, ceiling: int = NEWEST_OPSET) -> OpsetAnswer:
    """Ask the build behind `client`: the ceiling, then a bisection of what lies below it."""
    t0 = time.perf_counter()
    tried: dict[int, str] = {}
    best: int | None = None
    if _loads(client, ceiling, tried):
        best = ceiling
    else:
        low, high = floor, ceiling - 1  # the answer, if any, lies in [low, high]
        while low <= high:
            mid = (low + high + 1) // 2
            if _loads(client, mid, tried):
                best, low = mid, mid + 1
            else:
                high = mid - 1
    return OpsetAnswer(floor=floor, ceiling=ceiling, highest=best, tried=tried, seconds=time.perf_counter() - t0)


def answer_path(cache_dir: Path, info: BackendInfo, build_id: str = "") -> Path:
    return cache_dir / "support" / f"{build_stem(info, build_id)}-opsets.json"


def probe_opset(
    client: WorkerClient, info: BackendInfo, cache_dir: Path, ceiling: int = NEWEST_OPSET, build_id: str = ""
) -> OpsetAnswer:
    """The build's highest opset, from the cache where it was searched between the same bounds.
    An answer no opset ran for is never cached: a crash or a timeout is asked about again."""
    path = answer_path(cache_dir, info, build_id)
    if path.exists():
        try:
            cached = OpsetAnswer.model_validate_json(path.read_text())
        except ValueError:
            path.unlink()  # a damaged cache is asked again, not trusted
        else:
            if (cached.floor, cached.ceiling) == (FLOOR, ceiling):
                return cached.model_copy(update={"cached": True, "seconds": 0.0})
    answer = highest_opset(client, FLOOR, ceiling)
    if answer.highest is not None:
        write_whole(path, answer.model_dump_json(indent=1))
    return answer
