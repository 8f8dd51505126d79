"""The embedded default labs: `tunelab demo [TASK]` builds one and tells what it found."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from tunelab.core.errors import TunelabError

DEMOS = ("classification", "extraction", "ablation", "images")


def run_demo(
    task: str,
    lab: Path | None,
    console: Console,
    quiet: bool = False,
    overrides: dict | None = None,
) -> dict:
    """Build and tell one demo; `overrides` (`key=value`) change its spec before it is written,
    so the lab's own spec says what ran (e.g. a smaller budget)."""
    if task not in DEMOS:
        raise TunelabError(f"no demo for task {task!r}; known: {', '.join(DEMOS)}")
    from tunelab.demo import ablation, classification, extraction, images

    module = {
        "classification": classification,
        "extraction": extraction,
        "ablation": ablation,
        "images": images,
    }
    return module[task].run(lab or Path("demo-lab") / task, console, quiet, overrides or {})
