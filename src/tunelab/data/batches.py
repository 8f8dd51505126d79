"""A function over a long list of texts, a batch at a time, on every core: the rows of one
numpy array, however many texts there are.

The data step hashes a million texts (`near`): one batch at a time keeps the work arrays the
same size whatever the count, and worker processes (started by a forkserver, so nothing of
the caller's state is copied) use the other cores. At most two batches wait per worker, so
the texts in flight stay bounded too.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

import numpy as np

from tunelab.core.env import process_alive

BATCH_TEXTS = 2048
"""Texts per batch: large enough for numpy to pay, small enough that the work arrays (several
integers per word) stay within tens of MB."""
PARALLEL_FROM = 16_384
"""Texts from which batches go to worker processes (below it, starting them costs more than
they save)."""

_WORKER_PEAK = [0]
_WORKERS = [0]
_REPORT: list[Callable[[str], None]] = []
REPORT_EVERY_S = 10.0
"""How often a long map says how far it has come (`reporting`)."""


@contextmanager
def reporting(say: Callable[[str], None]) -> Iterator[None]:
    """While inside, every `map_batches` over many texts says how far it has come (`N of M
    texts`) at most every `REPORT_EVERY_S` seconds: a million rows' near duplicates had taken
    minutes with no word."""
    _REPORT.append(say)
    try:
        yield
    finally:
        _REPORT.pop()


def tell(what: str) -> None:
    """Say a stage inside a long step as it begins (`reporting`), where it counts nothing: the
    datatrove engine's stages had run for minutes with no word."""
    if _REPORT:
        _REPORT[-1](what)


def _reporter(total: int) -> Callable[[int], None]:
    said = [time.monotonic()]

    def done(n: int) -> None:
        if _REPORT and time.monotonic() - said[0] >= REPORT_EVERY_S:
            said[0] = time.monotonic()
            _REPORT[-1](f"{n:,} of {total:,} texts")

    return done


def map_batches(
    fn: Callable[..., np.ndarray],
    texts: Sequence[str],
    args: tuple[Any, ...],
    width: int,
    dtype: Any,
    workers: int | None = None,
) -> np.ndarray:
    """`fn(batch, *args)` for each batch of texts, stacked: one row of `width` per text. `fn`
    is a module-level function (the workers import it by name). `workers`: processes to use
    (default: every core this process may use; 1: this process alone)."""
    out = np.empty((len(texts), width), dtype=dtype)
    starts = range(0, len(texts), BATCH_TEXTS)
    workers = workers or len(os.sched_getaffinity(0))
    progress = _reporter(len(texts))
    if workers < 2 or len(texts) < PARALLEL_FROM:
        for i in starts:
            out[i : i + BATCH_TEXTS] = fn(texts[i : i + BATCH_TEXTS], *args)
            progress(min(i + BATCH_TEXTS, len(texts)))
        return out
    context = multiprocessing.get_context("forkserver")
    _forkserver_deaf_to_ctrl_c()
    _WORKERS[0] = max(_WORKERS[0], workers)
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_outlive_not, initargs=(os.getpid(),)
    ) as pool:
        pending: deque = deque()
        try:
            for i in starts:
                batch = list(texts[i : i + BATCH_TEXTS])
                pending.append((i, pool.submit(_in_worker, fn, batch, args)))
                if len(pending) >= 2 * workers:
                    j, done = pending.popleft()
                    out[j : j + BATCH_TEXTS] = _received(done.result())
                    progress(j + BATCH_TEXTS)
            for j, done in pending:
                out[j : j + BATCH_TEXTS] = _received(done.result())
        except BaseException:  # Ctrl-C: what waits is dropped, a batch running ends
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return out


def _forkserver_deaf_to_ctrl_c() -> None:
    """Start this process's forkserver, if it is not running, with SIGINT ignored: Python then
    leaves it ignored, and the forkserver gives its children (the workers) the disposition it
    started with. A Ctrl-C reaches the whole process group, and a worker it reached while
    importing tunelab (a second, for pydantic's models) printed its traceback under the data
    step's one line; this process stops the pool itself. A Ctrl-C in the milliseconds of the
    start is ignored."""
    from multiprocessing import forkserver

    try:
        before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: leave it as it is
        forkserver.ensure_running()
        return
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, before)


def workers_started() -> int:
    """The most worker processes one call of this process started (0: none)."""
    return _WORKERS[0]


def worker_peak_kib() -> int:
    """The largest resident memory (KiB) a worker process of this process reached: the
    workers are the forkserver's children, so `RUSAGE_CHILDREN` does not see them."""
    return _WORKER_PEAK[0]


LOOK_EVERY_S = 0.5
"""How often a worker looks whether the process it works for is still there."""


def _outlive_not(owner: int) -> None:
    """A worker's start: a thread that ends the worker once `owner`, the command it works for,
    is gone. A `data` killed with -9 (or by the kernel out of memory) left its workers blocked
    writing results nobody read, for ever, each with its memory, and holding the command's
    stdout open (`tunelab data | tee log` never ended); the forkserver, which waits for them,
    stayed too. Their parent is the forkserver, so the kernel's parent-death signal cannot
    say it."""
    import threading

    def watch() -> None:
        while process_alive(owner):
            time.sleep(LOOK_EVERY_S)
        os._exit(1)

    threading.Thread(target=watch, name="tunelab-owner-watch", daemon=True).start()


def _in_worker(fn: Callable[..., np.ndarray], batch: list[str], args: tuple) -> tuple:
    return fn(batch, *args), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _received(result: tuple[np.ndarray, int]) -> np.ndarray:
    rows, peak = result
    _WORKER_PEAK[0] = max(_WORKER_PEAK[0], peak)
    return rows
