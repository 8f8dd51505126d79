"""What a run shows while it trains when its output goes to a file: a plain line at the first
step, then at most every LINE_EVERY_S, and at the last; before, nothing until the end."""

from __future__ import annotations

import io

from rich.console import Console

from tunelab.training import progress


def test_a_file_gets_a_line_at_the_start_every_interval_and_at_the_end(monkeypatch):
    clock = iter([0.0, 1.0, 2.0, 31.0, 32.0, 40.0])  # the start, then one reading a step
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    file = Console(file=out, width=120)  # not a terminal
    with progress.step_progress(file, steps=5, done=0, unit="tok/s") as show:
        for step in range(1, 6):
            show(step, 1.0 / step, 1234.5)
    lines = out.getvalue().splitlines()
    assert lines == [
        "train: step 1/5, loss 1.0000, 1,234 tok/s, about 0:04 left",
        "train: step 3/5, loss 0.3333, 1,234 tok/s, about 0:21 left",  # 31 s after the first
        "train: step 5/5, loss 0.2000, 1,234 tok/s, done",
    ]


def test_no_console_shows_nothing_and_a_terminal_gets_the_bar():
    with progress.step_progress(None, steps=3, done=0, unit="tok/s") as show:
        show(1, 0.5, 10.0)  # nothing to show it on: no error
    out = io.StringIO()
    terminal = Console(file=out, force_terminal=True, width=120)
    with progress.step_progress(terminal, steps=3, done=1, unit="img/s") as show:
        show(2, 0.5, 10.0)
    assert "train: step" not in out.getvalue()  # the live bar, not plain lines
