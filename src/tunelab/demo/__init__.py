"""The embedded default labs: `tunelab demo [TASK]` builds one and tells what it found."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from tunelab.core.errors import TunelabError

DEMOS = ("classification", "extraction")


def run_demo(task: str, lab: Path | None, console: Console, quiet: bool = False) -> dict:
    if task not in DEMOS:
        raise TunelabError(f"no demo for task {task!r}; known: {list(DEMOS)}")
    from tunelab.demo import classification, extraction

    module = {"classification": classification, "extraction": extraction}[task]
    return module.run(lab or Path("demo-lab") / task, console, quiet)
