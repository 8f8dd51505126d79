"""Ctrl-C and SIGTERM: at once outside training, graceful during it, held while a record is
written. Each test sends itself the real signal."""

from __future__ import annotations

import signal

import pytest

from tunelab.core import stopping
from tunelab.core.stopping import graceful_stop, held, interrupt_on_signals


@pytest.fixture(autouse=True)
def ctrl_c_as_in_a_terminal():
    """Python's own Ctrl-C handler, as a process started from a terminal has: a suite run in
    the background (`make test &`, some CI runners) starts with SIGINT ignored, and an
    ignored signal is left ignored on purpose (see the test below)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize(("sig", "name"), [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")])
def test_either_signal_raises_at_once_naming_itself(sig, name):
    before = signal.getsignal(sig)
    with pytest.raises(KeyboardInterrupt, match=f"^{name}$"), interrupt_on_signals():
        signal.raise_signal(sig)
        pytest.fail("the signal did not stop the block")
    assert signal.getsignal(sig) is before  # restored


def test_a_signal_the_process_ignores_stays_ignored():
    """In training too: a background run's training had stopped on the terminal's Ctrl-C."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupt_on_signals():
            signal.raise_signal(signal.SIGINT)  # nothing happens
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            with graceful_stop() as stop:
                signal.raise_signal(signal.SIGINT)
                assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN and not stop.is_set()
    finally:
        signal.signal(signal.SIGINT, before)


def test_training_stops_after_its_step_on_the_first_signal_and_at_once_on_the_second():
    with interrupt_on_signals():
        with graceful_stop() as stop:
            signal.raise_signal(signal.SIGTERM)
            assert stop.is_set() and stop.cause == "SIGTERM"  # no exception: the step ends
            with pytest.raises(KeyboardInterrupt, match="Ctrl-C"):
                signal.raise_signal(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):  # after training: at once again
            signal.raise_signal(signal.SIGINT)


def test_the_same_sigterm_delivered_twice_is_one_graceful_stop(monkeypatch):
    """Sent to every process of a job and passed on by torchrun too: one stop, with its
    checkpoint. Later, or after a Ctrl-C, a second signal still stops at once."""
    with interrupt_on_signals(), graceful_stop() as stop:
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGTERM)  # no exception: the step still ends
        assert stop.is_set() and stop.cause == "SIGTERM"
        monkeypatch.setattr(stopping, "SAME_STOP_S", 0.0)
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            signal.raise_signal(signal.SIGTERM)
    with interrupt_on_signals(), graceful_stop() as stop:
        signal.raise_signal(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            signal.raise_signal(signal.SIGTERM)


def test_a_signal_during_a_held_block_comes_after_it():
    done = []
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"), interrupt_on_signals():
        with held():
            signal.raise_signal(signal.SIGTERM)
            done.append("the whole block ran")
        done.append("not reached")
    assert done == ["the whole block ran"]


def test_a_held_signal_goes_to_the_graceful_handler_during_training():
    with interrupt_on_signals(), graceful_stop() as stop:
        with held():
            signal.raise_signal(signal.SIGINT)
            assert not stop.is_set()
        assert stop.is_set() and stop.cause == "Ctrl-C"
