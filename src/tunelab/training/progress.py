"""What a training run shows while it trains: a live bar on a terminal; where its output goes
to a file (`tunelab run > run.log 2>&1`, nohup, a CI log) a plain line every `LINE_EVERY_S`
and at the last step, so a long run is never silent until its end; nothing without a console
(`--json`, or a rank other than the first)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from tunelab.core.durations import clock

LINE_EVERY_S = 30.0
"""A plain progress line at most this often (the first step and the last always have one)."""

Show = Callable[[int, float, float], None]
"""`show(step, loss, per_second)` after each optimizer step (`step` counts from 1)."""


@contextmanager
def step_progress(console: Console | None, steps: int, done: int, unit: str) -> Iterator[Show]:
    """The display of `steps` optimizer steps, `done` of them before this process started (a
    resumed run); `unit` is what the speed counts (`tok/s`, `img/s`)."""
    if console is None:
        yield lambda step, loss, per_second: None
    elif console.is_terminal:
        with _bar(console, steps, done, unit) as show:
            yield show
    else:
        yield _lines(console, steps, done, unit)


@contextmanager
def _bar(console: Console, steps: int, done: int, unit: str) -> Iterator[Show]:
    progress = Progress(
        TextColumn("[bold]train[/]"),
        BarColumn(),
        TextColumn("step {task.completed}/{task.total}  loss {task.fields[loss]:.4f}"),
        TextColumn("{task.fields[per_second]:,.0f} " + unit),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    with progress:
        fields = {"loss": float("nan"), "per_second": 0.0}
        bar = progress.add_task("train", total=steps, completed=done, **fields)

        def show(step: int, loss: float, per_second: float) -> None:
            progress.update(bar, completed=step, loss=loss, per_second=per_second)

        yield show


def _lines(console: Console, steps: int, done: int, unit: str) -> Show:
    start = time.monotonic()
    last: float | None = None  # when the last line was written

    def show(step: int, loss: float, per_second: float) -> None:
        nonlocal last
        now = time.monotonic()
        if step < steps and last is not None and now - last < LINE_EVERY_S:
            return
        last = now
        left = (now - start) / (step - done) * (steps - step) if step > done else 0.0
        console.print(
            f"train: step {step}/{steps}, loss {loss:.4f}, {per_second:,.0f} {unit}"
            + (f", about {clock(left)} left" if step < steps else ", done"),
            highlight=False,
        )

    return show
