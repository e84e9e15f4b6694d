"""The case corpus: generated cases (model, inputs, reference outputs) kept in one SQLite
file, so a campaign replays them instead of regenerating them.

Nothing in a case depends on the compiler under test, only on the generator, the
reference and the config that shaped generation. Those are hashed into the generator
key (`generator_key`); a case is looked up only by the current key, so a corpus written
by another generator or config is reported as stale and never replayed by mistake.

Per case the file keeps a coverage index, (case, feature) rows such as `op:Conv`,
`pair:Conv>Relu`, `dtype:float16`, `opdtype:Conv/float16` and, learned from runs,
`rewrite:<key>`: a campaign picks the cases that add the most coverage first
(`greedy_order`) from this index alone, before it reads a single model.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import sqlite3
import zlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import torch
from google.protobuf.message import DecodeError

import backends.reference
import generator
import oracles.references
from bot.cases.making import Prepared
from bot.errors import UserError
from generator import onnx_checks
from generator.api import GenConfig
from generator.dtypes import DType
from generator.ops import registry
from generator.symbolic import TType
from oracles.references import Source

FORMAT = "1"
"""The layout of the file and of its blobs; part of the key, so a new layout never reads an old one."""
FILE_NAME = "corpus.sqlite"
REFERENCE_MODULES = (oracles.references, backends.reference)
"""The modules that compute a case's reference outputs (the torch reference and its fallback)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cases(
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    seed INTEGER NOT NULL,
    nodes INTEGER NOT NULL,
    model BLOB NOT NULL,
    inputs BLOB NOT NULL,
    reference BLOB,
    source TEXT NOT NULL,
    gap TEXT NOT NULL,
    gap_op TEXT NOT NULL,
    UNIQUE(key, seed)
);
CREATE TABLE IF NOT EXISTS names(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS features(
    case_id INTEGER NOT NULL,
    name_id INTEGER NOT NULL,
    PRIMARY KEY(case_id, name_id)
) WITHOUT ROWID;
CREATE VIEW IF NOT EXISTS case_features AS
    SELECT f.case_id AS case_id, n.name AS feature FROM features f JOIN names n ON n.id = f.name_id;
"""


class CorpusError(UserError):
    """A corpus file that cannot be used: corrupt, foreign, or of another layout."""


def generator_key(cfg: GenConfig) -> str:
    """sha256 over everything a stored case is a function of: the generator's sources, the
    reference's, the library versions that compute them, and the generation config."""
    h = hashlib.sha256()
    h.update(f"format={FORMAT}\0".encode())
    for rel, path in _generator_sources():
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    for module in REFERENCE_MODULES:
        assert module.__file__ is not None
        h.update(Path(module.__file__).read_bytes() + b"\0")
    h.update(f"torch={torch.__version__} onnx={onnx.__version__} numpy={np.__version__}\0".encode())
    h.update(cfg.model_dump_json().encode())
    return h.hexdigest()


def _generator_sources() -> list[tuple[str, Path]]:
    """Every .py file of the generator package, by path relative to the package (a
    renamed module is a change too), in that order."""
    files = [(p.relative_to(root).as_posix(), p) for root in map(Path, generator.__path__) for p in root.rglob("*.py")]
    return sorted(files)


def pack_arrays(arrays: Mapping[str, np.ndarray]) -> bytes:
    """Named arrays as one zlib blob: a JSON header (name, dtype, shape) and the raw bytes,
    smaller than an .npz (no zip directory per array) and faster to read back."""
    header = [[name, a.dtype.str, list(a.shape)] for name, a in arrays.items()]
    body = b"".join(np.ascontiguousarray(a).tobytes() for a in arrays.values())
    return zlib.compress(json.dumps(header).encode() + b"\n" + body, 6)


def unpack_arrays(blob: bytes) -> dict[str, np.ndarray]:
    raw = bytearray(zlib.decompress(blob))
    cut = raw.index(b"\n")
    header = json.loads(bytes(raw[:cut]))
    out: dict[str, np.ndarray] = {}
    offset = cut + 1
    for name, dtype, shape in header:
        dt = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        out[name] = np.frombuffer(raw, dt, count, offset).reshape(shape)
        offset += count * dt.itemsize
    return out


def case_features(model: onnx.ModelProto) -> set[str]:
    """What a model covers: op types, producer>consumer op-type pairs, element types, and
    (op type, key dtype) pairs, the unit a backend's support matrix is keyed by."""
    types = _tensor_types(model)
    producer = {out: node.op_type for node in model.graph.node for out in node.output}
    specs = registry()
    features: set[str] = set()
    for node in model.graph.node:
        features.add(f"op:{node.op_type}")
        ins = [types[name] for name in node.input if name in types]
        for name in node.input:
            if name in producer:
                features.add(f"pair:{producer[name]}>{node.op_type}")
        features.update(f"dtype:{t.dtype.value}" for t in ins)
        key = _key_dtype(specs.get(node.op_type), ins)
        if key is not None:
            features.add(f"opdtype:{node.op_type}/{key.value}")
    return features


def _key_dtype(spec: object, ins: list[TType]) -> DType | None:
    """The dtype the support matrix keys this node by; the first input's when the spec is
    unknown or cannot say (a template's helper op). None where the node's inputs do not hold
    it: a window's only input is its int64 size, a Loop's first its trip count, while the
    matrix keys both by the float tensor their spec was inserted on."""
    if not ins:
        return None
    key_dtype = getattr(spec, "key_dtype", None)
    try:
        key = key_dtype(ins) if key_dtype is not None else ins[0].dtype
    except (IndexError, ValueError, TypeError, AttributeError):
        return ins[0].dtype
    dtypes = getattr(spec, "dtypes", None)
    return key if dtypes is None or key in dtypes else None


def _tensor_types(model: onnx.ModelProto) -> dict[str, TType]:
    """Element type and rank of every named tensor, from ONNX shape inference."""
    try:
        inferred = onnx_checks.infer_shapes(model)
    except (onnx.shape_inference.InferenceError, ValueError):
        inferred = model
    g = inferred.graph
    types: dict[str, TType] = {}
    for init in g.initializer:
        _note(types, init.name, init.data_type, len(init.dims))
    for v in (*g.input, *g.value_info, *g.output):
        t = v.type.tensor_type
        _note(types, v.name, t.elem_type, len(t.shape.dim))
    return types


def _note(types: dict[str, TType], name: str, elem: int, rank: int) -> None:
    with suppress(ValueError):  # an element type fuzzbot never generates: no feature from it
        types[name] = TType(DType.from_onnx(elem), rank)


def greedy_order(case_seeds: Mapping[int, int], features: Iterable[tuple[int, int]]) -> list[int]:
    """Case ids, the one adding the most features not yet covered first (ties: lower seed).

    Lazy greedy: a case's gain only shrinks as coverage grows, so a popped case whose
    recomputed gain still beats the next stored one is the true best."""
    per_case: dict[int, set[int]] = {cid: set() for cid in case_seeds}
    for cid, fid in features:
        if cid in per_case:
            per_case[cid].add(fid)
    heap = [(-len(f), case_seeds[cid], cid) for cid, f in per_case.items()]
    heapq.heapify(heap)
    covered: set[int] = set()
    order: list[int] = []
    while heap:
        neg, seed, cid = heapq.heappop(heap)
        gain = len(per_case[cid] - covered) if neg else 0
        if heap and gain < -neg and (-gain, seed) > heap[0][:2]:
            heapq.heappush(heap, (-gain, seed, cid))
            continue
        order.append(cid)
        covered |= per_case[cid]
    return order


@dataclass(frozen=True)
class Index:
    """The corpus's index for one key: case id -> seed, case id -> feature ids, feature names."""

    seeds: dict[int, int]
    features: list[tuple[int, int]]
    names: dict[int, str]


class Corpus:
    """One corpus folder. Every read and write goes through `_guard`, so a corrupt or
    foreign file is one line (CorpusError), never a traceback."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / FILE_NAME
        if folder.exists() and not folder.is_dir():
            raise CorpusError(f"corpus {folder}: not a folder")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CorpusError(f"corpus {folder}: cannot create: {e.strerror}") from e
        with self._guard():
            self.db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
            self._init()

    def _init(self) -> None:
        """Create the tables in an empty file; refuse any other file before writing to it."""
        if not self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.executescript(SCHEMA)
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT,))
        row = self._meta_format()
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        if row != FORMAT:
            raise CorpusError(f"corpus {self.path}: layout {row!r}, this fuzzbot reads {FORMAT!r}")

    def _meta_format(self) -> str:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
        except sqlite3.OperationalError as e:
            raise CorpusError(f"corpus {self.path}: not a fuzzbot corpus ({e})") from e
        if row is None:
            raise CorpusError(f"corpus {self.path}: not a fuzzbot corpus (no format)")
        return str(row[0])

    @contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as e:
            raise CorpusError(f"corpus {self.path}: unusable: {e}") from e

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def close(self) -> None:
        with self._guard():
            self.db.close()

    def count(self, key: str) -> tuple[int, int]:
        """(cases of this key, stale cases of other keys)."""
        with self._guard():
            rows = self.db.execute("SELECT key = ?, count(*) FROM cases GROUP BY key = ?", (key, key)).fetchall()
        by = {bool(k): int(n) for k, n in rows}
        return by.get(True, 0), by.get(False, 0)

    def seeds(self, key: str) -> set[int]:
        with self._guard():
            return {int(s) for (s,) in self.db.execute("SELECT seed FROM cases WHERE key = ?", (key,))}

    def prune_stale(self, key: str) -> int:
        """Delete the cases of every other key; they can never be replayed again."""
        with self._guard(), self._transaction():
            self.db.execute("DELETE FROM features WHERE case_id IN (SELECT id FROM cases WHERE key != ?)", (key,))
            return self.db.execute("DELETE FROM cases WHERE key != ?", (key,)).rowcount

    def add(self, key: str, cases: Iterable[Prepared]) -> int:
        """Insert cases (one transaction), skipping seeds already stored; returns how many were new.
        The model bytes are kept exactly as generation serialized them."""
        rows = [(c, len(c.model.graph.node), case_features(c.model)) for c in cases]
        added = 0
        with self._guard(), self._transaction():
            for case, nodes, features in rows:
                added += self._insert(key, case, nodes, features)
        return added

    def _insert(self, key: str, c: Prepared, nodes: int, features: set[str]) -> int:
        blobs = (zlib.compress(c.model_bytes, 6), pack_arrays(c.inputs))
        ref = None if c.reference is None else pack_arrays(c.reference)
        cur = self.db.execute(
            "INSERT OR IGNORE INTO cases(key, seed, nodes, model, inputs, reference, source, gap, gap_op)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key, c.seed, nodes, *blobs, ref, c.source.value, c.gap, c.gap_op),
        )
        if cur.rowcount != 1:
            return 0
        self._link([(cur.lastrowid, name) for name in sorted(features)])
        return 1

    def _link(self, rows: list[tuple[int | None, str]]) -> None:
        """(case id, feature name) rows, their names added first; two statements a batch."""
        self.db.executemany("INSERT OR IGNORE INTO names(name) VALUES (?)", [(name,) for _, name in rows])
        self.db.executemany(
            "INSERT OR IGNORE INTO features(case_id, name_id) SELECT ?, id FROM names WHERE name = ?", rows
        )

    def add_features(self, key: str, rows: Iterable[tuple[int, str]]) -> None:
        """(seed, feature) rows learned from runs (`rewrite:<key>`), for cases already stored;
        a few statements per batch, not per row: every replayed case reports its rewrites."""
        rows = list(rows)
        seeds = sorted({seed for seed, _ in rows})
        with self._guard(), self._transaction():
            ids: dict[int, int] = {}
            for start in range(0, len(seeds), 500):  # SQLite's bound-variable limit
                part = seeds[start : start + 500]
                marks = ",".join("?" * len(part))
                found = self.db.execute(f"SELECT seed, id FROM cases WHERE key = ? AND seed IN ({marks})", (key, *part))
                ids.update((int(s), int(i)) for s, i in found)
            self._link([(ids[seed], feature) for seed, feature in rows if seed in ids])

    def index(self, key: str) -> Index:
        """Everything `greedy_order` needs, from the index tables alone (no blob is read)."""
        with self._guard():
            seeds = dict(self.db.execute("SELECT id, seed FROM cases WHERE key = ?", (key,)).fetchall())
            features = self.db.execute(
                "SELECT f.case_id, f.name_id FROM features f JOIN cases c ON c.id = f.case_id WHERE c.key = ?",
                (key,),
            ).fetchall()
            names = dict(self.db.execute("SELECT id, name FROM names").fetchall())
        return Index(seeds, features, names)

    def load(self, case_id: int) -> Prepared:
        with self._guard():
            row = self.db.execute(
                "SELECT seed, model, inputs, reference, source, gap, gap_op FROM cases WHERE id = ?", (case_id,)
            ).fetchone()
        if row is None:
            raise CorpusError(f"corpus {self.path}: case {case_id} vanished (pruned by another run?)")
        seed, model, inputs, reference, source, gap, gap_op = row
        try:
            model_bytes = zlib.decompress(model)
            return Prepared(
                seed,
                onnx.load_from_string(model_bytes),
                model_bytes,
                unpack_arrays(inputs),
                None if reference is None else unpack_arrays(reference),
                Source(source),
                gap,
                gap_op,
            )
        except (zlib.error, ValueError, KeyError, TypeError, DecodeError) as e:
            raise CorpusError(f"corpus {self.path}: case {case_id} (seed {seed}) is corrupt: {e}") from e

    def size_bytes(self) -> int:
        """The corpus's size on disk: the file and its write-ahead log."""
        return sum(p.stat().st_size for p in self.folder.glob(FILE_NAME + "*") if p.is_file())
