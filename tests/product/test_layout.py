"""The layout table of docs/architecture.md is the import contract: every import between our
packages must be one its row allows, no modules import each other in a circle, and no module
grows past what one reading takes in."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tests.paths import ROOT

PACKAGES = ("generator", "backends", "oracles", "reducers", "bot")
TABLE_HEAD = "| package | what it owns | may import |"
LAYOUT_DOC = "docs/architecture.md"


def layout_table() -> dict[str, set[str]]:
    """Unit (a folder `x/` or a file `x.py`) -> the units it may import, from docs/architecture.md."""
    lines = (ROOT / LAYOUT_DOC).read_text().splitlines()
    start = lines.index(TABLE_HEAD) + 2
    table: dict[str, set[str]] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        owner, _, allowed = (cell.strip() for cell in line.strip("|").split("|"))
        units = re.findall(r"`([^`]+)`", owner)
        may = set(table) if allowed == "every package above" else set(re.findall(r"`([^`]+)`", allowed))
        for unit in units:
            table[unit] = may
    return table


def unit_of(path: str, units: set[str]) -> str | None:
    """The most specific unit that holds `path` (a file relative to the root)."""
    holding = [u for u in units if path == u or (u.endswith("/") and path.startswith(u))]
    return max(holding, key=len, default=None)


def allowed(unit: str, may: set[str]) -> bool:
    """A row that may import a folder may import a file in it that has a row of its own
    (`generator/onnx_checks.py`, which `reducers/` may import alone)."""
    return unit in may or any(m.endswith("/") and unit.startswith(m) for m in may)


def sources() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def module_file(module: str) -> str | None:
    base = ROOT / module.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return str(candidate.relative_to(ROOT))
    return None


def imported_files(path: Path) -> set[str]:
    """Our files that `path` imports, at any depth of its code except `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text())
    skipped = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name.split(".")[0] in PACKAGES and (target := module_file(name)) is not None:
                found.add(target)
    found.discard(str(path.relative_to(ROOT)))
    return found


def test_every_import_between_packages_is_one_the_layout_table_allows() -> None:
    table = layout_table()
    assert {"generator/", "bot/sides/", "bot/campaign/", "bot/cli.py"} <= set(table), "the table was not read"
    units = set(table)
    unplaced, forbidden = [], []
    for path in sources():
        rel = str(path.relative_to(ROOT))
        own = unit_of(rel, units)
        if own is None:
            unplaced.append(rel)
            continue
        for target in sorted(imported_files(path)):
            theirs = unit_of(target, units)
            if theirs is not None and theirs != own and not allowed(theirs, table[own]):
                forbidden.append(f"{rel} imports {target} ({own} may not import {theirs})")
    assert not unplaced, f"files in no row of the layout table ({LAYOUT_DOC}): {unplaced}"
    assert not forbidden, "\n".join(forbidden)


def test_no_modules_import_each_other_in_a_circle() -> None:
    graph = {str(p.relative_to(ROOT)): imported_files(p) for p in sources()}
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the walk's path, 2: done
    path: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                circles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                walk(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node)
    assert not circles, "\n".join(" -> ".join(c) for c in circles)


def test_each_package_docstring_names_the_bot_packages_its_row_allows() -> None:
    """A package's `__init__.py` says what it may import; three once allowed what the table
    forbids. The bot packages it names must be its row's (the version module aside)."""
    table = layout_table()
    checked = 0
    for init in sorted((ROOT / "bot").glob("*/__init__.py")):
        found = re.search(r"May import:(.*?)(?:\n\n|\"\"\"|\(docs)", init.read_text(), re.S)
        if found is None or "any bot package" in found.group(1):
            continue
        unit = f"bot/{init.parent.name}/"
        named = {
            f"bot/{m}/" if (ROOT / "bot" / m).is_dir() else f"bot/{m}.py"
            for m in re.findall(r"bot\.(\w+)", found.group(1))
        }
        allowed = {u for u in table[unit] if u.startswith("bot/") and u != "bot/__init__.py"}
        assert named == allowed, (unit, sorted(named ^ allowed))
        checked += 1
    assert checked >= 7


TIERS = {
    "release": re.compile(r"cached_venv|release_cases|tests\.venvs|known_flips|narrow_repo|toy_repo"),
    "campaign": re.compile(r"Campaign\(|open_campaign|\"fuzz\""),
}
"""What puts a test module in a tier (pyproject.toml's markers): the helpers that build
release venvs or compiler histories, and the calls that run a whole campaign."""


def test_each_test_module_that_builds_a_release_or_runs_a_campaign_is_marked_so() -> None:
    """`make quick` leaves out the `release` and `campaign` tiers: a module that needs one
    and is not marked would slip into the quick tier and make it slow."""
    unmarked = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        text = path.read_text()
        if path.name == Path(__file__).name:  # its own patterns name the helpers
            continue
        for mark, uses in TIERS.items():
            if uses.search(text) and f"pytest.mark.{mark}" not in text:
                unmarked.append(f"{path.name}: {mark}")
    assert not unmarked, unmarked


WHOLE_PRODUCT = "product"
"""The one test folder that mirrors no package: the product used whole (a real campaign
between two builds of a compiler's own history, the installed wheel, the docs, this layout)."""


def test_the_tests_are_laid_out_as_the_packages_are() -> None:
    """A test module sits in the folder of the package it tests (tests/bot/reduce/ for
    bot/reduce/), so a change's tests are found where its code is; nothing stays flat at
    the top, where 92 modules once were."""
    misplaced = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        folder = path.parent.relative_to(ROOT / "tests")
        if folder == Path("."):
            misplaced.append(f"{path.name}: at the top of tests/")
        elif folder.parts[0] != WHOLE_PRODUCT and not (ROOT / folder / "__init__.py").is_file():
            misplaced.append(f"{folder}/{path.name}: no package {folder}/")
    assert not misplaced, misplaced
