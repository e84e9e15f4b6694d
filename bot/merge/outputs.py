"""Merge shard output folders into one: what `fuzzbot merge` does after a CI matrix.

Each shard ran the same campaign on a slice of the seed space, so the merged output
is what one campaign over all slices would have written: counts, dropped cases and
tests add up; a bug found by several shards is one finding whose occurrences add up,
whose label is the one that matters most of those the shards saw it under, and whose
bundle is the smallest model any shard found of that label (reduced or not); summary.json
keeps the `Summary` schema, so everything that reads a campaign reads a merge.

Merging is idempotent. Every input is known by the shard ids it covers (a campaign:
its `shard` and first seed; a merge: the ids listed in its `merged_from`), an input
whose ids are already covered is skipped, and an existing merge output at --out is
an input too. So re-running a merge, naming a shard twice, or merging a late shard
into an earlier merge never counts a test twice.

The output is built in a temporary folder beside --out and swapped in at the end, so
an interrupted merge leaves the previous output as it was.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bot.errors import UserError
from bot.findings.bundle import Finding
from bot.findings.known_bugs import KNOWN_FILE
from bot.findings.store import REDUCED_DIR, FindingStore, StoredFinding, StoreError, combine, load_rows
from bot.findings.summary import CorpusSummary, FindingRef, PerfFinding, Summary, Timings, seen_union, write_summary
from bot.findings.summary_md import write_summary_md
from generator.coverage import CoverageStats
from oracles.count_keys import PERF_FOLDER, SET_ASIDE_FOLDERS


class MergeError(UserError):
    """Inputs that cannot be merged (not a campaign output, corrupt, clashing); one line."""


@dataclass(frozen=True)
class ShardOutput:
    """One input folder, read and validated."""

    path: Path
    summary: Summary
    raw: dict[str, Any]
    """summary.json as JSON, for the shard fields an older Summary model drops."""

    @property
    def covers(self) -> frozenset[str]:
        merged = self.raw.get("merged_from")
        if isinstance(merged, list) and merged:
            return frozenset(str(k) for k in merged)
        return frozenset({shard_id(self.summary, self.raw)})


@dataclass
class MergeReport:
    out: Path
    merged: list[Path] = field(default_factory=list)
    """Inputs whose shards this merge added (the earlier merge at --out is not one)."""
    skipped: list[Path] = field(default_factory=list)
    """Inputs whose shards were already in the merge (named twice, or merged before)."""
    findings: int = 0
    missing_bundles: list[str] = field(default_factory=list)


def shard_id(summary: Summary, raw: dict[str, Any] | None = None) -> str:
    """`i/N@seed`: the slice of seed space a campaign ran. Same slice, same models (the
    generator is deterministic), so two outputs with one id are the same work."""
    shard = (raw or {}).get("shard", getattr(summary, "shard", None)) or "0/1"
    return f"{shard}@{summary.seed_first}"


def read_output(path: Path) -> ShardOutput:
    """A campaign or merge output folder; anything else is a `MergeError`."""
    if not path.is_dir():
        raise MergeError(f"{path}: no such folder")
    summary_json = path / "summary.json"
    if not summary_json.is_file():
        raise MergeError(f"{path}: not a campaign output (no summary.json)")
    try:
        raw = json.loads(summary_json.read_text())
        if not isinstance(raw, dict):
            raise ValueError("the top level is not an object")
        summary = Summary.model_validate(raw)
    except (OSError, ValueError) as e:
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if isinstance(e, ValidationError):
            err = e.errors()[0]
            detail = f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}"
        raise MergeError(f"{summary_json}: corrupt summary ({detail})") from e
    return ShardOutput(path, summary, raw)


def _check_paths(inputs: list[Path], out: Path) -> None:
    target = out.resolve()
    for p in inputs:
        src = p.resolve()
        if src == target:
            raise MergeError(f"--out {out} is also an input; merge into a new folder")
        if target.is_relative_to(src) or src.is_relative_to(target):
            raise MergeError(f"--out {out} and input {p} are nested; keep them apart")


def _previous(out: Path) -> ShardOutput | None:
    """An earlier merge at --out (an input); a campaign's or a stranger's folder is refused."""
    if out.exists() and not out.is_dir():
        raise MergeError(f"--out {out} is a file; give a folder")
    if not out.exists() or not any(out.iterdir()):
        return None
    if not (out / "summary.json").is_file():
        raise MergeError(f"--out {out} exists and is not a merge output; choose an empty or new folder")
    previous = read_output(out)
    if not previous.raw.get("merged_from"):
        raise MergeError(f"--out {out} is a campaign's output, not a merge's; give it as an input instead")
    return previous


def select(outputs: list[ShardOutput]) -> tuple[list[ShardOutput], list[ShardOutput]]:
    """(taken, skipped): widest first, so a merge subsumes the shards it already holds;
    an input that shares only some shards with the rest cannot be split, so it is an error."""
    taken: list[ShardOutput] = []
    skipped: list[ShardOutput] = []
    covered: set[str] = set()
    for o in sorted(outputs, key=lambda o: -len(o.covers)):
        if o.covers <= covered:
            skipped.append(o)
        elif o.covers & covered:
            overlap = ", ".join(sorted(o.covers & covered))
            raise MergeError(f"{o.path}: shards {overlap} are already in another input; merge them apart")
        else:
            taken.append(o)
            covered |= o.covers
    return taken, skipped


def _backend_check(outputs: list[ShardOutput]) -> None:
    """Shards of one campaign ran the same builds; anything else would mix two campaigns' counts."""
    for side in ("backend", "base"):
        seen: dict[str, Path] = {}
        for o in outputs:
            info = getattr(o.summary, side)
            if info is not None:
                seen.setdefault(f"{info.name} {info.version} ({info.level}) {info.commit or ''}".strip(), o.path)
        if len(seen) > 1:
            (a, pa), (b, pb) = list(seen.items())[:2]
            raise MergeError(f"{pa} ran {a} but {pb} ran {b} ({side}); merge shards of one campaign")


def _sum(dicts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            total[k] = total.get(k, 0) + v
    return dict(sorted(total.items()))


def _coverage(stats: list[CoverageStats]) -> CoverageStats:
    """Models and dtype counts add up; the distinct counts (op types, pairs, ...) are not
    stored as sets, so the merge keeps the largest: a lower bound of the union."""
    return CoverageStats(
        models=sum(s.models for s in stats),
        op_types=max((s.op_types for s in stats), default=0),
        op_inputs=max((s.op_inputs for s in stats), default=0),
        attr_values=max((s.attr_values for s in stats), default=0),
        op_pairs=max((s.op_pairs for s in stats), default=0),
        dtypes=_sum(s.dtypes for s in stats),
        rewrites=_sum(s.rewrites for s in stats),
        patterns=_sum(s.patterns for s in stats),
        edges=_sum(s.edges for s in stats),
        opsets=_sum(s.opsets for s in stats),
        symbolic=sum(s.symbolic for s in stats),
    )


def merge_summaries(summaries: list[Summary]) -> Summary:
    """Counts, dropped, tests, occurrences and timings add up; wall time is the longest
    shard's (matrix shards run side by side); `findings` is left for the caller."""
    seeds_last = [s.seed_last for s in summaries if s.seed_last is not None]
    versions = sorted({s.fuzzbot_version for s in summaries if s.fuzzbot_version})
    return Summary(
        fuzzbot_version=", ".join(versions) or None,
        tests=sum(s.tests for s in summaries),
        counts=_sum(s.counts for s in summaries),
        dropped=_sum(s.dropped for s in summaries),
        value_work=_sum(s.value_work for s in summaries),
        references=_sum(s.references for s in summaries),
        reference_gaps=_sum(s.reference_gaps for s in summaries),
        tiebreaks=_sum(s.tiebreaks for s in summaries),
        steered=_sum(s.steered for s in summaries),
        levels=_sum(s.levels for s in summaries),
        imports=next((s.imports for s in summaries if s.imports), {}),
        sides=next((s.sides for s in summaries if s.sides), {}),
        compiler=next((s.compiler for s in summaries if s.compiler is not None), None),
        run_url=next((s.run_url for s in summaries if s.run_url), None),
        occurrences=_sum(s.occurrences for s in summaries),
        wall_s=max((s.wall_s for s in summaries), default=0.0),
        time_s=Timings(**_sum_floats(s.time_s.model_dump() for s in summaries)),
        backend=next((s.backend for s in summaries if s.backend is not None), None),
        base=next((s.base for s in summaries if s.base is not None), None),
        seed_first=min((s.seed_first for s in summaries), default=0),
        seed_last=max(seeds_last) if seeds_last else None,
        budget_s=max((s.budget_s for s in summaries), default=0.0),
        stopped_by=next((s.stopped_by for s in summaries if s.stopped_by), None),
        stopped_at=next((s.stopped_at for s in summaries if s.stopped_by), None),
        worker_restarts=sum(s.worker_restarts for s in summaries),
        support=next((s.support for s in summaries if s.support is not None), None),
        coverage=_coverage([s.coverage for s in summaries]),
        corpus=_corpus([s.corpus for s in summaries if s.corpus is not None]),
        regressions=next((s.regressions for s in summaries if s.regressions is not None), None),
    )


def _corpus(parts: list[CorpusSummary]) -> CorpusSummary | None:
    """Shards replay disjoint seeds of one corpus: their counts and times add up; stale is
    what each saw of the same file, so the largest."""
    if not parts:
        return None
    counts = {k: sum(getattr(p, k) for p in parts) for k in ("replayed", "generated", "added", "unsupported")}
    times = {k: sum(getattr(p, k) for p in parts) for k in ("load_s", "order_s", "write_s")}
    return CorpusSummary(path=parts[0].path, stale=max(p.stale for p in parts), **counts, **times)


def _sum_floats(dicts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Shards' timings added up, the per-side ones side by side."""
    total: dict[str, Any] = {}
    for d in dicts:
        for k, v in d.items():
            total[k] = _sum_floats([total.get(k, {}), v]) if isinstance(v, dict) else total.get(k, 0.0) + v
    return total


def _absolute_rows(o: ShardOutput) -> list[StoredFinding]:
    """The input's rows with bundle paths made absolute, so rows of several inputs combine."""
    shard = o.raw.get("shard")
    try:
        rows = load_rows(o.path, o.summary.occurrences, shard if isinstance(shard, str) else None)
    except StoreError as e:
        raise MergeError(str(e)) from e
    store = FindingStore.in_dir(o.path)
    return [r.model_copy(update={"bundle": _locate(store.resolve(r), o.path)}) for r in rows]


def _locate(bundle: Path | None, root: Path) -> str | None:
    """The bundle on this machine: where the store says, else by name under the input's
    findings/ (a store written on a CI runner may hold that runner's absolute paths)."""
    if bundle is None:
        return None
    if not bundle.is_dir() and (root / "findings" / bundle.name).is_dir():
        bundle = root / "findings" / bundle.name
    return str(bundle.resolve())


def merge_rows(outputs: list[ShardOutput]) -> list[StoredFinding]:
    merged: dict[str, StoredFinding] = {}
    for o in outputs:
        for row in _absolute_rows(o):
            old = merged.get(row.fingerprint)
            merged[row.fingerprint] = row if old is None else combine(old, row)
    return list(merged.values())


def _ref(known: FindingRef | None, bundle: Path, path: str, row: StoredFinding) -> FindingRef:
    """The shard's own FindingRef at its new path (relative to the merged output, like every
    path summary.json holds), or one rebuilt from finding.json, with the reduced model the
    store chose and the label the merged rows settled on (bot.findings.store.combine: shards that saw
    one bug under two labels agree on the one that matters most)."""
    reduced = {
        "reduced_path": f"{path}/{REDUCED_DIR}" if row.reduced else None,
        "reduced_nodes": row.nodes if row.reduced else None,
        **({"across": row.across} if row.across else {}),
    }
    if known is not None:
        return known.model_copy(update={"path": path, **reduced})
    f = Finding.model_validate_json((bundle / "finding.json").read_text())
    return FindingRef.of(f, path, **{"across": None, **reduced})


_SKIP_TEMPORARY = shutil.ignore_patterns(".*")
"""Hidden folders are half-written bundles of an interrupted campaign (see bot.findings.bundle)."""


def _copy_findings(
    rows: list[StoredFinding], outputs: list[ShardOutput], tmp: Path, report: MergeReport
) -> tuple[list[StoredFinding], list[FindingRef]]:
    """Copy each row's chosen bundle to tmp/findings/; rows and refs point at the copies."""
    known = {Path(r.path).name: r for o in outputs for r in o.summary.findings}
    seen: dict[str, list[str]] = {}
    triggers: dict[str, list[str]] = {}
    for ref in (r for o in outputs for r in o.summary.findings):
        seen[ref.fingerprint] = seen_union(seen.get(ref.fingerprint, []), ref.seen)
        triggers[ref.fingerprint] = seen_union(triggers.get(ref.fingerprint, []), ref.triggers)
    new_rows: list[StoredFinding] = []
    refs: list[FindingRef] = []
    for row in sorted(rows, key=lambda r: (r.first_seen, r.fingerprint)):
        src = Path(row.bundle) if row.bundle else None
        if src is None or not (src / "finding.json").is_file():
            if src is not None:
                report.missing_bundles.append(str(src))
            new_rows.append(row.model_copy(update={"bundle": None, "reduced": False, "nodes": None}))
            continue
        shutil.copytree(src, tmp / "findings" / src.name, ignore=_SKIP_TEMPORARY)
        new_rows.append(row.model_copy(update={"bundle": f"findings/{src.name}"}))
        ref = _ref(known.get(src.name), src, f"findings/{src.name}", row)
        update = {"seen": seen.get(ref.fingerprint, ref.seen), "triggers": triggers.get(ref.fingerprint, ref.triggers)}
        refs.append(ref.model_copy(update=update))
    return new_rows, refs


def _copy_set_aside(outputs: list[ShardOutput], tmp: Path) -> list[PerfFinding]:
    """flaky/, filtered/<rule>/ and perf/ cases of every shard; one seed is one case, so
    a name two shards share is the same case and either copy will do. Returns the perf
    findings, pointing at their copies."""
    for o in outputs:
        for folder in SET_ASIDE_FOLDERS:
            if (o.path / folder).is_dir():
                shutil.copytree(o.path / folder, tmp / folder, ignore=_SKIP_TEMPORARY, dirs_exist_ok=True)
    perf: dict[str, PerfFinding] = {}
    for o in outputs:
        for p in o.summary.perf:
            name = Path(p.path).name
            perf.setdefault(name, p.model_copy(update={"path": f"{PERF_FOLDER}/{name}"}))
    return sorted(perf.values(), key=lambda p: p.seed)


def _write_merged_summary(summary: Summary, covers: set[str], tmp: Path) -> None:
    """summary.json through the campaign's own writer: a merge is no shard, and says which
    shards it covers."""
    summary.shard, summary.merged_from = None, sorted(covers)
    write_summary(summary, tmp)


def _build(tmp: Path, taken: list[ShardOutput], out: Path, report: MergeReport) -> Summary:
    summary = merge_summaries([o.summary for o in taken])
    rows, summary.findings = _copy_findings(merge_rows(taken), taken, tmp, report)
    summary.perf = _copy_set_aside(taken, tmp)
    FindingStore.in_dir(tmp).add_all(rows)
    _write_merged_summary(summary, set().union(*(o.covers for o in taken)), tmp)
    write_summary_md(tmp, summary)
    _merge_known(taken, tmp)
    report.findings = len(rows)
    return summary


def _merge_known(taken: list[ShardOutput], tmp: Path) -> None:
    """The shards' known-bugs.json, one row per fingerprint; a shard without a readable one
    adds none (its bugs stay reported, only not steered away from)."""
    rows: dict[str, Any] = {}
    for o in taken:
        try:
            found = json.loads((o.path / KNOWN_FILE).read_text())
            rows.update((str(r["fingerprint"]), r) for r in found)
        except (OSError, ValueError, TypeError, KeyError):
            continue
    if rows:
        (tmp / KNOWN_FILE).write_text(json.dumps(list(rows.values()), indent=1) + "\n")


def _swap(tmp: Path, out: Path) -> None:
    """Put the finished merge at `out`; the old one is removed only once the new one is in place."""
    if out.exists() and not any(out.iterdir()):
        out.rmdir()
    if not out.exists():
        tmp.rename(out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    old.rmdir()
    out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def merge_outputs(inputs: list[Path], out: Path) -> tuple[Summary, MergeReport]:
    """Merge the campaign (or merge) output folders `inputs` into `out`."""
    if not inputs:
        raise MergeError("give at least one shard output folder to merge")
    _check_paths(inputs, out)
    outputs = [read_output(p) for p in inputs]
    previous = _previous(out)
    if previous is not None:
        outputs.insert(0, previous)
    taken, skipped = select(outputs)
    _backend_check(taken)
    # The earlier merge at --out is an input, but no new output: the count says what was added.
    report = MergeReport(out, [o.path for o in taken if o is not previous], [o.path for o in skipped])
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.merge-", dir=out.parent))
    except OSError as e:
        raise MergeError(f"--out {out}: cannot write: {e.strerror or e}") from e
    try:
        summary = _build(tmp, taken, out, report)
        _swap(tmp, out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise MergeError(f"--out {out}: cannot write the merge: {e}") from e
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return summary, report
