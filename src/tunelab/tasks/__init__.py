"""Task types: target rendering, metrics and guardrail values; a small registry by name."""

from __future__ import annotations

from typing import Any, Protocol

from tunelab.tasks import classification


class Task(Protocol):
    name: str
    overall_metrics: frozenset[str]
    """Metrics with one value per run (usable as the primary metric or an `overall` guardrail)."""
    class_metrics: frozenset[str]
    """Metrics with one value per class (usable in an `every_class` guardrail)."""

    def metrics(self, gold: list[Any], predicted: list[Any], labels: list[str]) -> dict: ...


TASKS: dict[str, Task] = {"classification": classification}


def get_task(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise ValueError(f"unknown task type {name!r}; known: {sorted(TASKS)}") from None
