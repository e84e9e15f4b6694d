"""The documentation matches the repository: every relative link in README.md and docs/ leads
to a file (and heading) inside it, the README stays a landing page, docs/commands.md lists
exactly the flags of each command of the real CLI, and every Action input and output is
documented. Each check is also run once on a broken example, so it is known to fail."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from tests.paths import ROOT

pytestmark = [pytest.mark.worker, pytest.mark.campaign]

README = ROOT / "README.md"
DOCS = ROOT / "docs"
COMMANDS_DOC = DOCS / "commands.md"
ACTION_DOC = DOCS / "action.md"
MAX_README_LINES = 300

FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)((?:(?!\n\s*\n).)+?)\1", re.DOTALL)
"""A code span, which may wrap onto the next line of its paragraph."""
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
HTML_LINK = re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)["']""")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
FLAG = re.compile(r"--[a-z][a-z0-9-]*")
COMMAND_HEADING = re.compile(r"^##\s+`fuzzbot ([a-z-]+)`\s*$")


def doc_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (a fence closes on the same character, at least as long)."""
    lines, fence = [], ""
    for line in text.splitlines():
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(fence) :]:
                fence = ""
            continue
        if m:
            fence = m.group(1)
            continue
        lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(text):
        if m := HEADING.match(line):
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def ignored_dirs(root: Path) -> set[str]:
    """Top-level folders .gitignore names (`.venv/`, `.cache/`, ...): nothing there is in the repository."""
    path = root / ".gitignore"
    lines = path.read_text().splitlines() if path.is_file() else []
    return {line.strip().strip("/") for line in lines if line.strip().endswith("/") and "*" not in line}


def link_targets(text: str) -> list[str]:
    prose = "\n".join(prose_lines(text))
    targets = [m.group(1) for line in prose.splitlines() if (m := REFERENCE_LINK.match(line))]
    bare = CODE_SPAN.sub("", prose)
    return targets + INLINE_LINK.findall(bare) + HTML_LINK.findall(bare)


def link_problems(doc: Path, text: str, root: Path) -> list[str]:
    """Every relative link of `doc` that leaves `root`, names a missing or ignored file, or a
    heading its Markdown target lacks; every absolute local path, and every code span that
    names a path above the repository (`../...`: code spans name paths from the root)."""
    problems: list[str] = []
    where = doc.relative_to(root)
    skip = ignored_dirs(root)
    for target in link_targets(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        if SCHEME.match(target) or target.startswith(("/", "\\", "~")):
            problems.append(f"{where}: {target}: a local path outside the repository")
            continue
        path, _, anchor = target.partition("#")
        if not path:
            if anchor not in anchors(text):
                problems.append(f"{where}: {target}: no such heading here")
            continue
        dest = (doc.parent / path).resolve()
        if not dest.is_relative_to(root.resolve()):
            problems.append(f"{where}: {target}: leaves the repository")
            continue
        rel = dest.relative_to(root.resolve())
        if not dest.exists() or (rel.parts and rel.parts[0] in skip):
            problems.append(f"{where}: {target}: no such file in the repository")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            problems.append(f"{where}: {target}: {rel} has no heading #{anchor}")
    for _, span in CODE_SPAN.findall("\n".join(prose_lines(text))):
        if span.strip().startswith("../"):
            problems.append(f"{where}: `{span}`: names a path outside the repository")
    return problems


def cli_flags() -> dict[str, set[str]]:
    """Command name -> its visible flags (both spellings of a `--x/--no-x` pair), from the real app."""
    from bot.cli import app

    group: Any = typer.main.get_command(app)  # typer vendors its own click: read it by its attributes
    flags: dict[str, set[str]] = {}
    for name, command in group.commands.items():
        flags[name] = {
            opt
            for param in command.params
            if param.param_type_name == "option" and not param.hidden
            for opt in (*param.opts, *param.secondary_opts)
            if opt.startswith("--")
        }
    return flags


def documented_flags(text: str) -> dict[str, set[str]]:
    """Command name -> the flags in the first column of its section's flag table."""
    found: dict[str, set[str]] = {}
    current: str | None = None
    for line in prose_lines(text):
        if m := COMMAND_HEADING.match(line):
            current = m.group(1)
            found[current] = set()
        elif line.startswith("## "):
            current = None
        elif current is not None and line.startswith("| `--"):
            found[current] |= set(FLAG.findall(line.split("|")[1]))
    return found


def flag_problems(documented: dict[str, set[str]], real: dict[str, set[str]]) -> list[str]:
    problems = [f"fuzzbot {c}: no `## \\`fuzzbot {c}\\`` section" for c in sorted(set(real) - set(documented))]
    problems += [f"fuzzbot {c}: documented, but no such command" for c in sorted(set(documented) - set(real))]
    for command in sorted(set(real) & set(documented)):
        for flag in sorted(real[command] - documented[command]):
            problems.append(f"fuzzbot {command} {flag}: missing from its flag table")
        for flag in sorted(documented[command] - real[command]):
            problems.append(f"fuzzbot {command} {flag}: documented, but the command has no such flag")
    return problems


def table_names(text: str, head: str) -> set[str]:
    """The backticked names in the first column of the table whose header row starts with `head`."""
    lines = prose_lines(text)
    start = next(i for i, line in enumerate(lines) if line.startswith(head)) + 2
    names: set[str] = set()
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        names |= set(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return names


def action() -> dict[str, dict[str, object]]:
    data = yaml.safe_load((ROOT / "action.yml").read_text())
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_into_the_repository(doc: Path) -> None:
    assert not link_problems(doc, doc.read_text(), ROOT), "\n".join(link_problems(doc, doc.read_text(), ROOT))


def test_the_link_check_catches_what_it_is_for(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## Real heading\n")
    (tmp_path / ".gitignore").write_text(".venv/\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "x.md").write_text("# X\n")
    broken = (
        "See [arch](../shared/ARCHITECTURE.md), [gone](docs/b.md), [abs](/etc/passwd),\n"
        "[file](file:///tmp/x), [anchor](docs/a.md#no-such-heading), [venv](.venv/x.md),\n"
        "and `../shared/ARCHITECTURE.md`.\n"
        "[fine](docs/a.md#real-heading) [web](https://example.com) [here](#top)\n\n# Top\n"
        "```\n[in a fence](nowhere.md)\n```\n"
    )
    problems = link_problems(tmp_path / "README.md", broken, tmp_path)
    assert len(problems) == 7, problems
    assert not any("real-heading" in p or "example.com" in p or "#top" in p or "nowhere" in p for p in problems)


def test_the_readme_is_a_landing_page() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move the reference into docs/"


def test_commands_doc_lists_exactly_the_flags_of_every_command() -> None:
    problems = flag_problems(documented_flags(COMMANDS_DOC.read_text()), cli_flags())
    assert not problems, "docs/commands.md disagrees with the CLI:\n" + "\n".join(problems)


def test_the_flag_check_catches_a_missing_flag() -> None:
    real = cli_flags()
    assert {"--probe", "--no-probe", "--cache-dir", "--json"} <= real["fuzz"], "the CLI was not read"
    text = COMMANDS_DOC.read_text().replace("| `--retry-failed` / `--no-retry-failed` |", "| (dropped) |")
    text = text.replace("| `--json` | print one JSON object", "| `--jsonn` | print one JSON object")
    problems = flag_problems(documented_flags(text), real)
    assert "fuzzbot bisect --retry-failed: missing from its flag table" in problems
    assert "fuzzbot check --jsonn: documented, but the command has no such flag" in problems


def test_every_action_input_and_output_is_documented() -> None:
    inputs, outputs = set(action()["inputs"]), set(action()["outputs"])
    text = ACTION_DOC.read_text()
    assert table_names(text, "| input |") == inputs, "docs/action.md's input table differs from action.yml"
    assert table_names(text, "| output |") == outputs, "docs/action.md's output table differs from action.yml"
    readme = README.read_text()
    missing = [name for name in sorted(inputs) if not re.search(rf"(?m)^\s*#?\s*{re.escape(name)}:", readme)]
    assert not missing, f"README.md's workflow does not list these Action inputs: {missing}"


def test_how_a_failure_is_questioned_is_told_once() -> None:
    heading = re.compile(r"^#{1,6}\s+how a failure is questioned", re.IGNORECASE)
    found = [
        str(d.relative_to(ROOT)) for d in doc_files() for line in prose_lines(d.read_text()) if heading.match(line)
    ]
    assert len(found) == 1, f"one section on how a failure is questioned, not {found}"


def test_the_example_workflows_give_the_action_only_inputs_it_has() -> None:
    """A misspelt input is a warning on GitHub, and the step then runs without it."""
    docker = set(action()["inputs"])
    composite = set(yaml.safe_load((ROOT / "composite" / "action.yml").read_text())["inputs"])
    wrong: list[str] = []
    read = set()
    for workflow in sorted((ROOT / "examples" / "workflows").glob("*.yml")):
        data = yaml.safe_load(workflow.read_text())
        steps = [step for job in data["jobs"].values() for step in job.get("steps", [])]
        for step in steps:
            uses = str(step.get("uses", ""))
            inputs = composite if uses.startswith("your-org/fuzzbot/composite@") else docker
            if uses.startswith("your-org/fuzzbot"):
                read |= {f"{uses}: {key}" for key in step.get("with", {})}
                wrong += [f"{workflow.name}: {key}" for key in step.get("with", {}) if key not in inputs]
    assert {"your-org/fuzzbot@v1: head-wheel", "your-org/fuzzbot/composite@v1: build"} <= read, "not read"
    assert wrong == []
