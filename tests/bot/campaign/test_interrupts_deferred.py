"""A signal that comes while a finding is written and listed waits for the listing: one CI
run signalled a campaign between the two, and its summary.json missed a bundle on disk.
Real signals sent to this process, with the handler the CLI installs."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from bot.errors import Interrupted, interrupts_deferred, signals_interrupt


@pytest.fixture
def handled() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted`, as under `fuzzbot` (bot.cli). A test run
    started in the background inherits an ignored SIGINT, and the CLI's section leaves an
    ignored signal ignored: SIGINT gets Python's own handler first, as a process started
    in the foreground has."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with signals_interrupt():
            yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _signal_self(sig: signal.Signals) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(0.05)  # a Python handler runs between bytecodes, soon after delivery


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_inside_the_section_raises_at_its_end(handled: None, sig: signal.Signals) -> None:
    cli_handler = signal.getsignal(sig)
    done: list[str] = []
    with pytest.raises(Interrupted) as raised, interrupts_deferred():
        _signal_self(sig)
        done.append("written")
        done.append("listed")
    assert done == ["written", "listed"]
    assert raised.value.signal == sig.name
    assert signal.getsignal(sig) is cli_handler, "the handler is the CLI's again"


def test_outside_the_section_a_signal_still_interrupts_at_once(handled: None) -> None:
    done: list[str] = []
    with pytest.raises(Interrupted):
        _signal_self(signal.SIGTERM)
        done.append("written")
    assert done == []


def test_nested_sections_hold_the_signal_to_the_outermost_end(handled: None) -> None:
    done: list[str] = []
    with pytest.raises(Interrupted), interrupts_deferred():
        with interrupts_deferred():
            _signal_self(signal.SIGTERM)
            done.append("inner")
        done.append("outer")
    assert done == ["inner", "outer"]


def test_an_ignored_signal_stays_ignored() -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with interrupts_deferred():
            _signal_self(signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_an_interrupt_raised_inside_a_finalizer_is_sent_again_once_it_returns() -> None:
    """Python prints and drops an exception a `__del__` raises: one CI run's SIGTERM landed
    in a z3 Context's finalizer, and the cancelled campaign fuzzed on to its budget."""

    class Finalized:
        def __del__(self) -> None:
            signal.raise_signal(signal.SIGTERM)  # the handler raises here, in the finalizer

    done: list[str] = []
    with pytest.raises(Interrupted) as raised, signals_interrupt():
        Finalized()
        done.append("finalized")
        time.sleep(5)
        done.append("slept through it")
    assert done == ["finalized"]
    assert raised.value.signal == "SIGTERM"
