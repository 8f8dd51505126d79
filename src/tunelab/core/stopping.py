"""Stopping on request: Ctrl-C and SIGTERM end any command promptly, and the same way.

Three modes, each a context manager that restores the handlers it replaced:

- `interrupt_on_signals` (the CLI, around every command): either signal raises
  `KeyboardInterrupt("Ctrl-C")` or `KeyboardInterrupt("SIGTERM")` at once, wherever the command
  is (loading, evaluating, saving). A signal the process was started with ignored (`nohup`, a
  background job) stays ignored, here and in `graceful_stop`.
- `graceful_stop` (around training): the first signal sets the `StopRequest` it yields, and the
  loop finishes its step, checkpoints and raises `TrainingInterrupted`; a second one raises
  `KeyboardInterrupt` at once, except a second SIGTERM within `SAME_STOP_S` of the first: that
  is the same stop arriving twice (a scheduler that signals every process of a job, and
  `torchrun` passing the same signal on to its ranks).
- `held` (around writing a record): a signal waits until the block is done, then is raised.

Handlers can only be set in the main thread; elsewhere these do nothing, and the signal keeps
whatever effect the main thread gives it.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)
NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
SAME_STOP_S = 5.0
"""A SIGTERM this soon after the first one is the same stop, not a demand to stop at once."""


class StopRequest(threading.Event):
    """Set when a stop was asked for during training; `cause` names the signal."""

    cause: str | None = None
    asked: float = 0.0

    def ask(self, signum: int) -> None:
        self.cause, self.asked = NAMES.get(signum, f"signal {signum}"), time.monotonic()
        self.set()

    def again(self, signum: int) -> bool:
        """A repeat of the first SIGTERM (delivered twice to this process), to be ignored."""
        recent = time.monotonic() - self.asked < SAME_STOP_S
        return signum == signal.SIGTERM and self.cause == "SIGTERM" and recent


def _raise(signum: int, frame) -> None:
    raise KeyboardInterrupt(NAMES.get(signum, f"signal {signum}"))


@contextmanager
def interrupt_on_signals() -> Iterator[None]:
    """Ctrl-C or SIGTERM raises KeyboardInterrupt at once, naming the signal."""
    with _handlers(_raise, keep_ignored=True):
        yield


@contextmanager
def graceful_stop(console=None) -> Iterator[StopRequest]:
    """The first Ctrl-C or SIGTERM asks the training loop to stop after its step (with a
    checkpoint); a second one stops at once (a SIGTERM repeated within SAME_STOP_S does not)."""
    stop = StopRequest()

    def handler(signum: int, frame) -> None:
        if stop.is_set():
            if stop.again(signum):
                return
            _raise(signum, frame)
        stop.ask(signum)
        if console:
            console.print("[yellow]stopping after this step (checkpoint, then exit)…[/]")

    with _handlers(handler, keep_ignored=True):
        yield stop


@contextmanager
def held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block is done (a line or record half-way through being
    written is finished); one that came meanwhile is then sent again, to the handler that was
    there before (during training: a graceful stop; elsewhere: KeyboardInterrupt). When the
    block raises, its own exception goes on and the held signal is dropped."""
    came: list[int] = []
    with _handlers(lambda signum, frame: came.append(signum)):
        yield
    for signum in came:
        signal.raise_signal(signum)


@contextmanager
def _handlers(handler: Callable, keep_ignored: bool = False) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in SIGNALS:
        if keep_ignored and signal.getsignal(sig) is signal.SIG_IGN:
            continue
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
