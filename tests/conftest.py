"""Shared helpers: run the real CLI in-process and capture what a user would see."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.cli import main
from bot.config import FuzzConfig
from generator.api import Support


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    def invoke(*args: str) -> CliResult:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke


@pytest.fixture(scope="session")
def probe_cache() -> str:
    """The support-probe cache campaigns use by default (`cache_dir`, relative to the
    repository root the tests run in), so that a test naming it and a campaign left at the
    default probe each backend build once per clean clone, not once each. Entries are keyed
    by build and probe format (bot.sides.probe), and written atomically, so pytest-xdist
    workers share it too."""
    default = FuzzConfig.model_fields["cache_dir"].default
    path = Path(default).resolve()
    path.mkdir(exist_ok=True)
    return str(path)


def _ort_support(probe_cache: str, opset: int) -> Support:
    from pathlib import Path

    from backends.client import WorkerClient
    from backends.spec import parse_backend
    from bot.sides.probe import probe_support

    with WorkerClient(parse_backend("onnxruntime:all")) as client:
        assert client.info is not None
        matrix = probe_support(client, client.info, opset, Path(probe_cache), lambda f: None)
    return matrix.support()


@pytest.fixture(scope="session")
def ort_support(probe_cache: str) -> Support:
    """The real onnxruntime's op x dtype support matrix at opset 17, probed once per run."""
    return _ort_support(probe_cache, 17)


NEWER_OPSET = 22
"""Where the ops added after opset 17 (the bitwise ops, CenterCropPad, Gelu, GroupNormalization, Mish) all exist."""


@pytest.fixture(scope="session")
def ort_support_newer(probe_cache: str) -> Support:
    """The same matrix at NEWER_OPSET."""
    return _ort_support(probe_cache, NEWER_OPSET)


NEWEST_OPSET = 26
"""The newest opset fuzzbot writes, where the ops of 23 to 26 exist (Attention, RMSNormalization,
RotaryEmbedding, TensorScatter, Swish, CumProd, BitCast)."""


@pytest.fixture(scope="session")
def ort_support_newest(probe_cache: str) -> Support:
    """The same matrix at NEWEST_OPSET."""
    return _ort_support(probe_cache, NEWEST_OPSET)


TIER_ORDER = ("campaign", "release")
"""Modules of these tiers run first, the slowest tier first: with pytest-xdist's `--dist
loadfile` each module runs on one worker, and a long campaign module handed out last kept
one core busy for minutes after the other had finished."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Whole campaigns, then release venvs, then the rest; a stable sort, so each module's
    tests stay together and in their order (the markers are per module), and every worker
    collects the same order, which xdist requires."""

    def tier(item: pytest.Item) -> int:
        marks = {m.name for m in item.iter_markers()}
        return next((i for i, name in enumerate(TIER_ORDER) if name in marks), len(TIER_ORDER))

    items.sort(key=tier)
