"""The campaign config (`fuzzbot.yml`), validated once, reported in one line when wrong."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from backends.faults import FaultSpec
from backends.spec import BackendSpecError, adapter_class, canonical_level, parse_backend
from bot.errors import UserError
from bot.sides.config import CompilerConfig
from generator.api import GenConfig
from oracles.config import OracleConfig
from oracles.rules import RulesError, read_rules_file
from oracles.tolerances import ToleranceConfig

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


class ConfigError(UserError, ValueError):
    """A config problem, phrased as `file: key: reason`."""


def parse_duration(value: Any, name: str = "") -> float:
    """Seconds from `120`, `120s`, `2m` or `1.5h`: the one reading of a duration, for the
    config, every flag and the Action's inputs. A ConfigError (a ValueError, so pydantic
    reports it in place) names `name`, the flag or input, when given."""
    where = f"{name}: " if name else ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", str(value))
        if not m:
            raise ConfigError(f"{where}{value!r} is not a duration such as 90s, 2m or 1h")
        seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if seconds <= 0:
        raise ConfigError(f"{where}a duration must be positive")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]

_SIZES = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(value: Any, name: str = "") -> int:
    """Bytes from `4GiB`, `4G`, `512MiB`, `512m` or a plain count; binary units either way
    (a memory bound in decimal gigabytes helps nobody)."""
    where = f"{name}: " if name else ""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bkmgt]?)(?:i?b)?\s*", str(value), re.IGNORECASE)
        if not m:
            raise ConfigError(f"{where}{value!r} is not a size such as 4GiB or 512MiB")
        size = int(float(m.group(1)) * _SIZES[m.group(2).lower()])
    if size <= 0:
        raise ConfigError(f"{where}a size must be positive")
    return size


Size = Annotated[int, BeforeValidator(parse_size)]
DEFAULT_MEMORY = "4GiB"
"""How much the bot's own memory may grow: a campaign's `memory`, `gen`'s and a bundle
reduction's `--memory`."""


def memory_option(value: str | None, name: str = "--memory") -> int | None:
    """A command's `--memory`: bytes of headroom (backends.memory), `DEFAULT_MEMORY` when not
    given, None for `none` (no bound)."""
    if value is not None and value.strip().lower() == "none":
        return None
    return parse_size(value or DEFAULT_MEMORY, name)


class TestFault(BaseModel):
    """Test-only: make the worker fail for real on every `every`-th model (by hash)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["segv", "abort", "hang", "perturb", "slow", "flaky", "corrupt"]
    every: int = Field(1, ge=1)
    both: bool = False
    """Base's worker fails too (two builds): every failure is persistent."""

    def spec(self) -> FaultSpec:
        """What a worker is told (backends.faults): the same two keys, as JSON."""
        return FaultSpec(kind=self.kind, every=self.every)


class ReduceSettings(BaseModel):
    """The `reduce:` section: what a campaign does with its new findings after the budget."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="reduce each new finding after the fuzzing budget")
    budget: Duration = Field(60.0, description="time limit per finding, e.g. 60s")
    max_tests: int = Field(300, ge=1, description="test limit per finding")
    max_findings: int = Field(
        200, ge=0, description="findings reduced per campaign: one of each kind first, regressions first"
    )
    share: float = Field(1.0, ge=0, description="reduction's time after the fuzzing budget, as a share of that budget")
    generalize: bool = Field(True, description="try each reduced trigger at other dtypes to name the bug")
    during: bool = Field(
        True,
        description="reduce the first finding of each kind while fuzzing, so the rest of the campaign"
        " steers away from its trigger (known_bugs.avoid)",
    )
    during_share: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="the most of the fuzzing budget reductions while fuzzing may take; the rest wait for after it",
    )


class GuideSettings(BaseModel):
    """The `guide:` section: where a campaign looks besides fresh coverage-guided generation.
    Each part only acts where it has something to act on (two builds, a diff), and each can
    be switched off to measure it (bench/regressions_found.py)."""

    model_config = ConfigDict(extra="forbid")

    divergence: bool = Field(
        True, description="two builds: draw the next models toward the features of cases where base and head differed"
    )
    mutation: bool = Field(
        True, description="spend part of the budget on mutants of divergent cases, near misses and findings"
    )
    hint: bool = Field(
        True, description="two builds: weigh the ops and rewrites the change's diff names (git refs, or Python sources)"
    )
    code_coverage: bool = Field(
        True,
        description="measure the system's own Python code (its converter, its passes) in head's worker and steer "
        "toward cases that reach code, above all the lines the change touched, no case reached yet",
    )
    coverage_modules: list[str] = Field(
        default_factory=list,
        description="packages to measure (default: the adapter's coverage_modules, else its system_modules)",
    )
    coverage_every: int = Field(
        1, ge=1, description="measure one seed in N (tracing a pure-Python converter costs tests per second)"
    )


class KnownBugsSettings(BaseModel):
    """The `known_bugs:` section: bugs that already have a reduced trigger, which the
    generator steers away from so the budget goes to bugs not yet found (generator.avoid)."""

    model_config = ConfigDict(extra="forbid")

    files: list[Path] = Field(
        default_factory=list, description="known-bugs.json files, or earlier output folders that hold one"
    )
    avoid: float = Field(
        0.9, ge=0.0, le=1.0, description="chance an insertion that completes a known trigger is undone; 0: never"
    )


def parse_test_fault(text: str | None) -> TestFault | None:
    """`KIND[:EVERY]` from the hidden `--test-fault` flags; a ConfigError says what is valid."""
    if not text:
        return None
    kind, _, every = text.partition(":")
    try:
        return TestFault(kind=kind, every=int(every or 1))
    except (ValueError, ValidationError) as e:
        kinds = ", ".join(get_args(TestFault.model_fields["kind"].annotation))
        raise ConfigError(f"--test-fault {text!r}: expected KIND[:EVERY] with KIND in {kinds}") from e


class FuzzConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    budget: Duration = Field(120.0, description="campaign length, e.g. 120s or 2m")
    seed: int = Field(0, ge=0, description="first seed; test i uses seed + i")
    out: Path = Field(Path("fuzzbot-out"), description="output folder")
    backend: str = Field("onnxruntime:all", description="backend spec NAME[:LEVEL]")
    levels: list[str] = Field(
        default_factory=list,
        description="levels each case draws one of by its seed, run at that level on every side (tvm: default, fold,"
        " inference, nhwc; onnxruntime: all, parallel); empty: the backend's own level only",
    )
    compiler: CompilerConfig | None = Field(
        None, description="two builds to compare (base and head); without it, one build is fuzzed"
    )
    python: str | None = Field(None, description="interpreter the backend worker runs under; default: this one")
    timeout: Duration = Field(10.0, description="limit on a test's run stage before it counts as a hang")
    compile_timeout: Duration = Field(
        120.0, description="limit on a test's import and compile stages (a JIT is slow, not hung)"
    )
    max_tests: int | None = Field(None, ge=1, description="stop after this many tests even if budget remains")
    keep_per_fingerprint: int = Field(1, ge=1, description="bundles kept for each distinct fingerprint")
    jobs: int = Field(1, ge=1, le=64, description="parallel lanes, each with its own worker per side")
    generator: GenConfig = Field(default_factory=GenConfig)
    tolerances: ToleranceConfig = Field(
        default_factory=ToleranceConfig, description="comparison bounds: per dtype, per backend, per op type"
    )
    oracles: OracleConfig = Field(default_factory=OracleConfig, description="how candidate findings are questioned")
    reduce: ReduceSettings = Field(default_factory=ReduceSettings, description="automatic reduction of new findings")
    known_bugs: KnownBugsSettings = Field(
        default_factory=KnownBugsSettings, description="bugs already reduced, steered away from"
    )
    bisect: bool = Field(False, description="bisect each new regression between the base and head refs")
    guide: GuideSettings = Field(
        default_factory=GuideSettings, description="divergence feedback, mutation and diff hints"
    )
    corpus: Path | None = Field(
        None,
        description="case corpus folder (bot.cases.corpus): replay its cases for this generator first, then add the"
        " fresh ones; created if missing",
    )
    generation_processes: int | None = Field(
        None,
        ge=0,
        description="processes that generate cases for the lanes (bot.cases.generation_pool); default: one per lane"
        " when the machine has a core for the campaign, each lane's worker and each such process (2 x jobs + 1), else"
        " none (each lane makes its next case while its workers compute)",
    )
    regressions: Path | None = Field(
        None,
        description="regression corpus folder (bot.cases.regression_corpus): every bundle in it is judged before"
        " fuzzing, and each new reduced finding is added to it; created if missing",
    )
    memory: Size | None = Field(
        parse_size(DEFAULT_MEMORY),
        description="how much the bot's own memory may grow while it fuzzes, judges and reduces (backends.memory),"
        " e.g. 4GiB: a case that asks for more is dropped and counted (summary.json dropped.over_memory_bound);"
        " null: no bound",
    )
    probe: bool = Field(True, description="probe which op x dtype pairs the backend supports before generating")
    probe_from_base: bool = Field(
        True,
        description="two builds from commits: head is asked only about the ops the git diff can have touched, and"
        " takes base's answers for the rest; a diff with a line naming no op (a helper, a build file) asks everything",
    )
    cache_dir: Path = Field(Path(".fuzzbot-cache"), description="where support matrices are cached per backend build")
    test_fault: TestFault | None = Field(None, description="test-only fault injection")

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, v: str) -> str:
        try:
            return str(parse_backend(v))
        except BackendSpecError as e:
            raise ValueError(str(e)) from e

    @field_validator("levels")
    @classmethod
    def _known_levels(cls, v: list[str], info: ValidationInfo) -> list[str]:
        """A built-in backend's levels spelled its way, each once; a plugin's are checked
        against its worker's handshake when the campaign starts (bot.campaign.levels)."""
        if "backend" not in info.data:
            return v  # the backend is wrong, and says so itself
        spec = parse_backend(info.data["backend"])
        if spec.plugin:
            return list(dict.fromkeys(v))
        names = adapter_class(spec.adapter).levels
        try:
            return list(dict.fromkeys(canonical_level(level, names, spec.name) for level in v))
        except BackendSpecError as e:
            raise ValueError(str(e)) from e


def _first_error(e: ValidationError, overrides: dict[str, Any]) -> str:
    """The first error, named as the user gave the value: by the flag when a flag gave it
    (`--jobs 0`, not the config key `jobs` they never wrote), else by its key in the file."""
    err = e.errors()[0]
    message = str(err["msg"]).removeprefix("Value error, ")
    flag = _flag_of(tuple(str(p) for p in err["loc"]), overrides)
    if flag is not None:
        return f"{flag}: {message}"
    key = ".".join(str(p) for p in err["loc"]) or "(top level)"
    return f"key '{key}': {message}"


def _flag_of(loc: tuple[str, ...], overrides: dict[str, Any]) -> str | None:
    """The flag and value a config key came from, if a flag gave it (bot.cli's overrides)."""
    if loc[:2] == ("generator", "nodes"):
        key, value = "nodes", overrides.get("nodes")
    elif loc[:1] == ("oracles",) and len(loc) > 1:
        key, value = loc[1], (overrides.get("oracles") or {}).get(loc[1])
    elif loc and loc[0] != "oracles":
        key, value = loc[0], overrides.get(loc[0])
    else:
        return None
    if value is None:
        return None
    shown = ",".join(map(str, value)) if isinstance(value, list) else str(value)
    return f"--{key.replace('_', '-')} {shown}"


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not a YAML text file (byte {e.start} is not UTF-8)") from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark else ""
        raise ConfigError(f"{path}: {line}not valid YAML ({getattr(e, 'problem', None) or e})") from e
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys")
    return loaded or {}


def _check_text(path: Path | None, key: str) -> None:
    """A file the campaign reads later, refused now when it is not text (a binary picked by
    mistake), before any build or probe; a missing one is said where it is read."""
    if path is None or not path.is_file():
        return
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{key}: {path}: not a text file (byte {e.start} is not UTF-8)") from e
    except OSError as e:
        raise ConfigError(f"{key}: {path}: cannot read: {e.strerror or e}") from e


def _check_rules(path: Path | None) -> None:
    """The user's rules file read as the campaign will read it (oracles.rules), now, before
    any build or probe: a binary file, bad YAML or a bad rule costs nothing yet. A missing
    one is said where it is read."""
    if path is None or not path.is_file():
        return
    try:
        read_rules_file(path)
    except RulesError as e:
        raise ConfigError(f"oracles.rules: {e}") from e


def load_config(path: Path | None, overrides: dict[str, Any]) -> FuzzConfig:
    """Read `path` (if any), apply command-line overrides, validate everything at once."""
    where = str(path) if path else "command line"
    data = _read_yaml(path) if path is not None else {}
    gen = dict(data.get("generator") or {})
    for key, value in overrides.items():
        if value is None:
            continue
        if key == "nodes":
            gen["nodes"] = value
        elif key == "oracles":  # flags refine the file's section, they do not replace it
            data["oracles"] = {**(data.get("oracles") or {}), **value}
        else:
            data[key] = value
    if gen:
        data["generator"] = gen
    try:
        cfg = FuzzConfig.model_validate(data)
    except ValidationError as e:
        first = _first_error(e, overrides)
        raise ConfigError(first if first.startswith("--") else f"{where}: {first}") from e
    _check_rules(cfg.oracles.rules)
    for known in cfg.known_bugs.files:
        _check_text(known, "known_bugs.files")
    return cfg
