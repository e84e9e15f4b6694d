"""The single-op models the support probe asks every build, generated once for all of them.

The probe asks a build about each op x dtype pair at each opset with up to PROBE_MODELS
small models, drawn by the generator from fixed seeds. They are the same models for every
build: only the answers differ. Drawing them took three quarters of a probe (8.5 ms a pair
against 2.5 ms to run one on onnxruntime), and a PR's head is a new build every time, so
every PR check paid it again. They are kept here, per opset, in the campaign's cache
folder, keyed by everything the draw depends on (the generator's source and the versions
of the libraries it draws with): a build probed after the first is asked the same models
without drawing them.

The file holds model bytes and raw arrays as JSON, never a pickle: a CI cache is restored
from other branches' runs, and loading it must not run anything.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import ml_dtypes
import numpy as np

import generator
from bot.files import write_whole
from generator.api import GenConfig, generate
from generator.dtypes import DType
from generator.values import NoValidValues

PROBE_SEEDS = 24
"""Seeds tried per combination for models that contain the op."""

_DRAWN_WITH = ("numpy", "onnx", "z3-solver", "ml_dtypes")
"""The libraries a draw's result depends on, besides the generator's own code."""


@dataclass(frozen=True)
class ProbeModel:
    """One model the probe asks: its bytes, its inputs, and the op types it writes."""

    model: bytes
    inputs: dict[str, np.ndarray]
    ops: frozenset[str]
    seed: int


@dataclass
class _Drawn:
    """What is drawn so far for one pair: the models, in the order asked, and where to go on."""

    models: list[ProbeModel] = field(default_factory=list)
    next_seed: int = 0

    @property
    def exhausted(self) -> bool:
        return self.next_seed >= PROBE_SEEDS


@functools.cache
def draw_key() -> str:
    """What the probe's models depend on: the generator's source, the libraries it draws
    with, and Python's version (its hashing and float printing)."""
    digest = hashlib.sha256(sys.version.encode())
    for name in _DRAWN_WITH:
        try:
            digest.update(f"{name}={metadata.version(name)}".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{name}=none".encode())
    root = Path(generator.__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _draw(op: str, dtype: DType, opset: int, seed: int) -> ProbeModel | None:
    # wide_types 0: a seed of the wide share would start from int16 or an unsigned type, and
    # the probe of (Add, float32) would ask the build about another type
    cfg = GenConfig(nodes=1, ops=[op], dtypes=[dtype], opset=opset, feedback=False, wide_types=0.0)
    try:
        case = generate(seed, cfg)
    except (RuntimeError, ValueError, NoValidValues):
        return None
    ops = frozenset(n.op_type for n in case.model.graph.node)
    if op not in ops:
        return None
    return ProbeModel(case.model.SerializeToString(), dict(case.inputs), ops, seed)


class ProbeModels:
    """The probe's models at each opset, drawn once and kept in `cache_dir` (None: in
    memory only, for this process). Two builds probed at once share one (bot.campaign.probing):
    a pair's models are drawn by whichever asks first, under a lock (the generator is not
    thread-safe), and the other is asked the same ones."""

    def __init__(self, cache_dir: Path | None) -> None:
        self.root = cache_dir / "probe-models" / draw_key() if cache_dir is not None else None
        self._opsets: dict[int, dict[str, _Drawn]] = {}
        self._changed: set[int] = set()
        self._lock = threading.Lock()

    def asking(self, op: str, dtype: DType, opset: int) -> Iterator[ProbeModel]:
        """The models that ask a build about (op, dtype), in the order asked; each is drawn
        only when the ones before it did not settle the answer."""
        asked = 0
        while (model := self._nth(op, dtype, opset, asked)) is not None:
            yield model
            asked += 1

    def _nth(self, op: str, dtype: DType, opset: int, n: int) -> ProbeModel | None:
        """The `n`-th model of (op, dtype), drawn if need be; None once its seeds are spent."""
        with self._lock:
            drawn = self._at(opset).setdefault(f"{op}|{dtype.value}", _Drawn())
            while len(drawn.models) <= n:
                if drawn.exhausted:
                    return None
                self._changed.add(opset)
                seed, drawn.next_seed = drawn.next_seed, drawn.next_seed + 1
                model = _draw(op, dtype, opset, seed)
                if model is not None:
                    drawn.models.append(model)
            return drawn.models[n]

    def keep(self, opset: int) -> None:
        """Write what was drawn at `opset` for the next build, and let it go from memory: a
        probe is done with an opset before the next (a narrow plugin's 11 opsets drew 58 MB
        of models, most of them for pairs it declines). A build still asking at that opset
        reads them back from the file."""
        with self._lock:
            drawn = self._opsets.pop(opset, None)
            if self.root is None or drawn is None or opset not in self._changed:
                return
            pairs = {key: _dump(d) for key, d in drawn.items()}
            write_whole(self.root / f"opset{opset}.json", json.dumps({"pairs": pairs}))
            self._changed.discard(opset)

    def _at(self, opset: int) -> dict[str, _Drawn]:
        if opset not in self._opsets:
            self._opsets[opset] = self._load(opset)
        return self._opsets[opset]

    def _load(self, opset: int) -> dict[str, _Drawn]:
        if self.root is None or not (self.root / f"opset{opset}.json").exists():
            return {}
        try:
            pairs = json.loads((self.root / f"opset{opset}.json").read_text())["pairs"]
            return {key: _load(entry) for key, entry in pairs.items()}
        except (OSError, ValueError, KeyError, TypeError):
            return {}  # damaged: drawn again, and written whole over it


def _dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _dump(drawn: _Drawn) -> dict[str, object]:
    models = [
        {
            "model": base64.b64encode(m.model).decode(),
            "ops": sorted(m.ops),
            "seed": m.seed,
            "inputs": [
                [name, a.dtype.name, list(a.shape), base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()]
                for name, a in m.inputs.items()
            ],
        }
        for m in drawn.models
    ]
    return {"next_seed": drawn.next_seed, "models": models}


def _load(entry: dict[str, object]) -> _Drawn:
    models = []
    for m in entry["models"]:  # type: ignore[attr-defined]
        inputs = {
            name: np.frombuffer(base64.b64decode(raw), dtype=_dtype(dtype)).reshape(shape).copy()
            for name, dtype, shape, raw in m["inputs"]
        }
        models.append(ProbeModel(base64.b64decode(m["model"]), inputs, frozenset(m["ops"]), int(m["seed"])))
    return _Drawn(models, int(entry["next_seed"]))  # type: ignore[call-overload]
