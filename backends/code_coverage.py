"""The system's own code coverage, measured inside the worker with the `coverage` library.

Where a compiler's converter or passes are Python (TVM's Relax ONNX frontend, a plugin
compiler such as onnx2torch), the lines and branches a model drives through them are the
feedback COMET and Tzer steer by: a case that reaches code no case reached before is worth
mutating, and one that reaches the lines a change touched is worth the most. The worker
measures the packages the adapter names (`coverage_modules`, else `system_modules`) while
it converts, compiles and runs a case, and answers with the arcs (line-to-line branches)
no earlier case of this process executed; the bot keeps the campaign's union across worker
restarts. Files are named from their package (`onnx2torch/node_converters/pad.py`), so a
diff's paths and another venv's copy of the same module name the same file.

This module runs in the worker, under the side's interpreter: standard library only, and
`coverage` imported lazily, so a side without it says so in one line and runs as before.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from typing import Any

Arcs = dict[str, list[tuple[int, int]]]
"""File (package-relative) -> (from line, to line) arcs; negative lines are entries and exits."""


def package_roots(packages: list[str]) -> dict[str, str]:
    """The folder each importable package lives in -> its dotted name as a path prefix."""
    roots: dict[str, str] = {}
    for name in packages:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        for where in (spec.submodule_search_locations or []) if spec is not None else []:
            roots[os.path.realpath(where)] = name.replace(".", "/")
    return roots


def relative_name(path: str, roots: dict[str, str]) -> str | None:
    """A measured file named from its package, or None when it lies in none of them."""
    real = os.path.realpath(path)
    for root, prefix in sorted(roots.items(), key=lambda kv: -len(kv[0])):
        if real.startswith(root + os.sep):
            return f"{prefix}/{os.path.relpath(real, root)}"
    return None


class CodeCoverage:
    """Arcs of the measured packages, per run, that this process had not executed before."""

    def __init__(self, packages: list[str]) -> None:
        import coverage  # the side's own; ImportError says it has none

        self.roots = package_roots(packages)
        if not self.roots:
            raise ValueError(f"none of {', '.join(packages) or 'no packages'} can be imported to measure")
        self._cov: Any = coverage.Coverage(
            data_file=None, branch=True, source_pkgs=list(packages), config_file=False, messages=False
        )
        self._seen: dict[str, set[tuple[int, int]]] = {}
        self._names: dict[str, str | None] = {}

    @contextlib.contextmanager
    def measuring(self) -> Iterator[None]:
        self._cov.start()
        try:
            yield
        finally:
            self._cov.stop()

    def new_arcs(self, every: bool = False) -> Arcs:
        """What the runs measured since the last call added to this process's union (with
        `every`: all they executed, for a caller asking whether one model reaches a line);
        the collected data is then dropped, so each call costs what one run executed."""
        data = self._cov.get_data()
        found: Arcs = {}
        for path in data.measured_files():
            if path not in self._names:
                self._names[path] = relative_name(path, self.roots)
            name = self._names[path]
            if name is None:
                continue
            seen = self._seen.setdefault(name, set())
            ran = set(data.arcs(path) or ())
            new = ran if every else ran - seen
            if new:
                seen |= new
                found[name] = sorted(new)
        self._cov.erase()
        return found


def start_coverage(packages: list[str]) -> tuple[CodeCoverage | None, str]:
    """A measurer for `packages`, or None and the one-line reason there is none."""
    try:
        return CodeCoverage(packages), "on"
    except ImportError:
        return None, "off: the side's interpreter has no `coverage` package"
    except Exception as e:  # noqa: BLE001 - coverage is feedback: it never keeps a worker from starting
        return None, f"off: {type(e).__name__}: {e}"
