"""The findings store: OUT/findings.sqlite, one row per fingerprint.

summary.json says what one campaign counted; the store says what is known about each
bug: how often and when it was seen, by which seed and shard, and the smallest model
that shows it. A smaller reduced bundle replaces a bigger one, so a report always
links the best repro found so far, whichever run or shard found it.

Every write is one IMMEDIATE transaction: a campaign killed mid-write leaves the
previous state, never half a row. The journal is SQLite's rollback journal, not WAL, on
purpose: committed rows are always in the one .sqlite file, so a CI artifact, a copy
or a tarball of the output folder holds every row, and a store in a read-only folder
(a downloaded shard) can still be read.
Bundle paths are stored relative to the store's folder, so the output folder can be
moved, archived or downloaded as a CI artifact and still resolve.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from pydantic import BaseModel

from bot.errors import UserError
from bot.findings.bundle import Finding
from oracles.sides import CrossKey, finding_label
from oracles.verdict import Verdict

STORE_NAME = "findings.sqlite"
SCHEMA_VERSION = 1
REDUCED_DIR = "reduced"
"""Where `fuzzbot reduce` writes a bundle's reduced twin (bot.reduce.candidates.REDUCED_DIR)."""

_COLUMNS = (
    "fingerprint",
    "verdict",
    "across",
    "signature",
    "backend_name",
    "backend_version",
    "first_seen",
    "first_seed",
    "first_shard",
    "last_seen",
    "last_seed",
    "last_shard",
    "count",
    "bundle",
    "reduced",
    "nodes",
)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
    """CREATE TABLE IF NOT EXISTS findings (
    fingerprint TEXT PRIMARY KEY,
    verdict TEXT NOT NULL,
    across TEXT NOT NULL,
    signature TEXT NOT NULL,
    backend_name TEXT NOT NULL,
    backend_version TEXT NOT NULL,
    first_seen TEXT NOT NULL,
    first_seed INTEGER,
    first_shard TEXT,
    last_seen TEXT NOT NULL,
    last_seed INTEGER,
    last_shard TEXT,
    count INTEGER NOT NULL,
    bundle TEXT,
    reduced INTEGER NOT NULL,
    nodes INTEGER
)""",
)
"""Statement by statement: executescript would commit the open transaction first."""

_UPSERT = f"INSERT OR REPLACE INTO findings ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM findings"


class StoreError(UserError):
    """A findings store that cannot be opened or is of another schema; one line."""


class StoredFinding(BaseModel):
    """One bug as the store knows it. `bundle` is the finding bundle folder (relative
    to the store's folder when inside it); `reduced` says whether its `reduced/` twin is
    the smallest model, and `nodes` is that model's node count (None: unreadable)."""

    fingerprint: str
    verdict: Verdict
    """The failing side's own verdict, as the finding's (bot.findings.bundle.Finding)."""
    across: CrossKey = ""
    """The label across sides, typed as the finding's; "" for a one-build row of an old store."""
    signature: str = ""
    backend_name: str = ""
    backend_version: str = ""
    first_seen: str
    first_seed: int | None = None
    first_shard: str | None = None
    last_seen: str
    last_seed: int | None = None
    last_shard: str | None = None
    count: int = 1
    bundle: str | None = None
    reduced: bool = False
    nodes: int | None = None

    @property
    def smallest(self) -> str | None:
        """The folder of the smallest model: the reduced bundle when there is one."""
        if self.bundle is None:
            return None
        return f"{self.bundle}/{REDUCED_DIR}" if self.reduced else self.bundle


def timestamp(when: datetime | str | None = None) -> str:
    """One ISO form (UTC, seconds; a naive time is taken as UTC) so that string order is
    time order, in SQL and in Python."""
    if when is None:
        when = datetime.now(UTC)
    elif isinstance(when, str):
        when = datetime.fromisoformat(when)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="seconds")


def _node_count(model: Path) -> int | None:
    try:
        return len(onnx.load(str(model), load_external_data=False).graph.node)
    except (OSError, DecodeError, ValueError, RuntimeError):
        return None


def measure(bundle: Path) -> tuple[bool, int | None]:
    """(reduced, nodes) of the smallest readable model in `bundle`: its reduced twin when
    that one loads, else the original. The reducer may still be writing `reduced/`, so a
    missing or unreadable twin just means "not reduced yet"."""
    reduced = bundle / REDUCED_DIR / "model.onnx"
    if reduced.is_file():
        nodes = _node_count(reduced)
        if nodes is not None:
            return True, nodes
    return False, _node_count(bundle / "model.onnx")


def relative_to_root(path: Path, root: Path) -> str:
    """`path` relative to `root` when inside it (POSIX form), else absolute."""
    absolute = path.resolve()
    try:
        return absolute.relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(absolute)


def row_for(
    finding: Finding,
    bundle: Path | None,
    seen: datetime | str | None,
    root: Path,
    shard: str | None = None,
    count: int = 1,
) -> StoredFinding:
    """The row one occurrence of `finding` makes on its own (bundle None: not kept)."""
    when = timestamp(seen or finding.created or None)
    reduced, nodes = measure(bundle) if bundle is not None else (False, None)
    return StoredFinding(
        fingerprint=finding.fingerprint,
        verdict=finding.verdict,
        across=finding.across,
        signature=finding.signature,
        backend_name=finding.backend.name,
        backend_version=finding.backend.version,
        first_seen=when,
        first_seed=finding.seed,
        first_shard=shard,
        last_seen=when,
        last_seed=finding.seed,
        last_shard=shard,
        count=count,
        bundle=relative_to_root(bundle, root) if bundle is not None else None,
        reduced=reduced,
        nodes=nodes,
    )


def _smaller(new: StoredFinding, old: StoredFinding) -> bool:
    """Whether `new`'s bundle beats `old`'s; ties keep the old one, so re-recording is stable."""
    if new.bundle is None:
        return False
    if old.bundle is None:
        return True
    if new.nodes is None:
        return False
    return old.nodes is None or new.nodes < old.nodes


def _shown(old: StoredFinding, new: StoredFinding, label: str) -> StoredFinding:
    """Whose bundle a combined row keeps: among the rows whose sightings show the finding's
    label, the smaller bundle (a new regression's repro must pass on base, which a
    persistent sighting's does not); when neither shows it, the smaller of the two."""
    showing = [r for r in (old, new) if r.across == label and r.bundle is not None]
    if len(showing) == 1:
        return showing[0]
    return new if _smaller(new, old) else old


def combine(old: StoredFinding, new: StoredFinding) -> StoredFinding:
    """Two rows of one fingerprint as one: counts add, first/last seen widen, the label is
    the one that matters most (oracles.sides.finding_label, whichever came first), the
    bundle is one that shows it, and the backend comes from the later sighting."""
    first = new if new.first_seen < old.first_seen else old
    later = new if new.last_seen > old.last_seen else old
    label = finding_label([old.across, new.across])
    best = _shown(old, new, label)
    return later.model_copy(
        update={
            "across": label,
            "first_seen": first.first_seen,
            "first_seed": first.first_seed,
            "first_shard": first.first_shard,
            "last_seen": later.last_seen,
            "last_seed": later.last_seed,
            "last_shard": later.last_shard,
            "count": old.count + new.count,
            "bundle": best.bundle,
            "reduced": best.reduced,
            "nodes": best.nodes,
        }
    )


class FindingStore:
    """The store at `path` (created on first use). Holds no connection between calls, so
    it is cheap to make, safe to share with a subprocess, and never left open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.root = path.parent

    @classmethod
    def in_dir(cls, out: Path) -> FindingStore:
        return cls(out / STORE_NAME)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            with closing(sqlite3.connect(self.path, timeout=30.0, isolation_level=None)) as conn:
                conn.execute("PRAGMA journal_mode=DELETE")
                conn.execute("PRAGMA synchronous=FULL")
                conn.execute("BEGIN IMMEDIATE")
                try:
                    self._ensure_schema(conn)
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: not a usable findings store ({e})") from e

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection: reading never creates, migrates or locks the store for writing."""
        try:
            with closing(sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)) as conn:
                found = [v for (v,) in conn.execute("SELECT version FROM schema_version").fetchall()]
                if found != [SCHEMA_VERSION]:
                    version = found[0] if found else "missing"
                    raise StoreError(f"{self.path}: schema version {version}, this fuzzbot reads {SCHEMA_VERSION}")
                yield conn
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: not a usable findings store ({e})") from e

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        for statement in _SCHEMA:
            conn.execute(statement)
        found = conn.execute("SELECT version FROM schema_version").fetchall()
        if not found:
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        elif found[0][0] != SCHEMA_VERSION:
            raise StoreError(f"{self.path}: schema version {found[0][0]}, this fuzzbot reads {SCHEMA_VERSION}")

    def record(
        self, finding: Finding, bundle: Path | None, seen: datetime | str | None = None, shard: str | None = None
    ) -> StoredFinding:
        """One occurrence of `finding` (bundle None when this occurrence kept no bundle);
        `seen` defaults to the finding's creation time, then to now."""
        return self.add(row_for(finding, bundle, seen, self.root, shard))

    def add(self, row: StoredFinding) -> StoredFinding:
        """Fold `row` into its fingerprint's row."""
        return self.add_all([row])[0]

    def add_all(self, rows: Iterable[StoredFinding]) -> list[StoredFinding]:
        """Fold each row into its fingerprint's row, all in one transaction (how merge
        writes a shard's rows: all of them or none)."""
        merged: list[StoredFinding] = []
        with self._transaction() as conn:
            for row in rows:
                old = self._get(conn, row.fingerprint)
                new = row if old is None else combine(old, row)
                values = new.model_dump(include=set(_COLUMNS), mode="json")
                conn.execute(_UPSERT, [values[c] for c in _COLUMNS])
                merged.append(new)
        return merged

    def rename(self, old: str, new: str, signature: str) -> StoredFinding | None:
        """Move a row to the fingerprint its reduced model earned (wrong results are named by
        the reduced model's structure), folding it into a row already there."""
        with self._transaction() as conn:
            row = self._get(conn, old)
            if row is None or old == new:
                return row
            conn.execute("DELETE FROM findings WHERE fingerprint = ?", (old,))
            moved = row.model_copy(update={"fingerprint": new, "signature": signature})
            there = self._get(conn, new)
            merged = moved if there is None else combine(there, moved)
            values = merged.model_dump(include=set(_COLUMNS), mode="json")
            conn.execute(_UPSERT, [values[c] for c in _COLUMNS])
            return merged

    def relabel(self, labels: Mapping[str, str]) -> None:
        """Set the label of each fingerprint in `labels` that has a row, as given: the label
        summary.json lists is the final word (a reduction may have learned what a finding
        is, and a reused output folder holds labels of earlier campaigns), so the two agree."""
        if not labels or not self.path.exists():
            return
        with self._transaction() as conn:
            conn.executemany(
                "UPDATE findings SET across = ? WHERE fingerprint = ? AND across != ?",
                [(label, fp, label) for fp, label in labels.items()],
            )

    def offer(self, fingerprint: str, bundle: Path) -> StoredFinding | None:
        """Re-measure `bundle` (after `fuzzbot reduce` wrote its reduced twin) and keep it
        if it is the row's own bundle or now the smallest; None when the fingerprint is unknown."""
        with self._transaction() as conn:
            old = self._get(conn, fingerprint)
            if old is None:
                return None
            reduced, nodes = measure(bundle)
            new = old.model_copy(
                update={"bundle": relative_to_root(bundle, self.root), "reduced": reduced, "nodes": nodes}
            )
            if new.bundle != old.bundle and not _smaller(new, old):
                return old
            conn.execute(
                "UPDATE findings SET bundle = ?, reduced = ?, nodes = ? WHERE fingerprint = ?",
                (new.bundle, new.reduced, new.nodes, fingerprint),
            )
            return new

    def get(self, fingerprint: str) -> StoredFinding | None:
        if not self.path.exists():
            return None
        with self._reading() as conn:
            return self._get(conn, fingerprint)

    def all(self) -> list[StoredFinding]:
        """Every row, most frequent first (then by fingerprint, for a stable order)."""
        if not self.path.exists():
            return []
        with self._reading() as conn:
            cur = conn.execute(f"{_SELECT} ORDER BY count DESC, fingerprint")
            return [_row(r) for r in cur.fetchall()]

    def resolve(self, row: StoredFinding) -> Path | None:
        """The bundle folder of `row` on this machine."""
        if row.bundle is None:
            return None
        p = Path(row.bundle)
        return p if p.is_absolute() else self.root / p

    @staticmethod
    def _get(conn: sqlite3.Connection, fingerprint: str) -> StoredFinding | None:
        cur = conn.execute(f"{_SELECT} WHERE fingerprint = ?", (fingerprint,))
        found = cur.fetchone()
        return None if found is None else _row(found)


def _row(values: tuple[object, ...]) -> StoredFinding:
    return StoredFinding.model_validate(dict(zip(_COLUMNS, values, strict=True)))


def rows_from_bundles(out: Path, occurrences: Mapping[str, int], shard: str | None = None) -> list[StoredFinding]:
    """The rows an output folder without a store implies: one per bundle under
    OUT/findings/, counts from summary.json's occurrences. This is how merge and the
    Markdown summary read campaigns that ran before the store existed."""
    rows: dict[str, StoredFinding] = {}
    findings = out / "findings"
    for bundle in sorted(findings.iterdir()) if findings.is_dir() else []:
        try:
            finding = Finding.model_validate_json((bundle / "finding.json").read_text())
        except (OSError, ValueError):
            continue  # not a bundle (or a temporary folder of an interrupted write)
        fp = finding.fingerprint
        row = row_for(finding, bundle, None, out, shard, count=0 if fp in rows else occurrences.get(fp, 1))
        rows[fp] = row if fp not in rows else combine(rows[fp], row)
    return list(rows.values())


def load_rows(out: Path, occurrences: Mapping[str, int], shard: str | None = None) -> list[StoredFinding]:
    """What is known about the findings in `out`: its store, else its bundles."""
    store = FindingStore.in_dir(out)
    if not store.path.exists():
        return rows_from_bundles(out, occurrences, shard)
    rows = []
    for row in store.all():
        # Measured again: `fuzzbot reduce` may have written a reduced twin after the store did.
        path = out / row.bundle if row.bundle else None
        if path is not None and path.is_dir():
            reduced, nodes = measure(path)
            row = row.model_copy(update={"reduced": reduced, "nodes": nodes})
        rows.append(row)
    return rows
