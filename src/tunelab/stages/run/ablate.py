"""`tunelab ablate KEY=V1,V2,...`: one variant per value of one parameter, same parent.

Every variant differs from the parent in that one key alone, so the one-change rule holds by
construction; the summary sets the values side by side on the primary metric.
"""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console

from tunelab.core.errors import TunelabError
from tunelab.core.lab import open_lab
from tunelab.core.spec import parse_value
from tunelab.stages.run.variant import run_variant
from tunelab.tasks import get_task


def parse_assignment(text: str) -> tuple[str, list]:
    """`training.lr=1e-4,5e-4` -> ("training.lr", [0.0001, 0.0005]); values are read as YAML."""
    key, sep, raw = text.partition("=")
    values = [parse_value(v) for v in raw.split(",") if v.strip()]
    if not sep or not key.strip() or len(values) < 1:
        raise TunelabError(f"ablate {text!r}: expected KEY=V1,V2,... e.g. training.lr=1e-4,5e-4")
    return key.strip(), values


def run_name(key: str, value) -> str:
    """The variant's run name, `lr-0.0001`: the key's last part and the value, in the
    characters a run name allows (`tunelab.core.store.check_run_name`)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{key.rsplit('.', 1)[-1]}-{value}")
    name = re.sub(r"\.{2,}", ".", name).lstrip(".-") or "value"
    return name[:64]


def run_ablation(
    lab_path: Path,
    assignment: str,
    parent: str | None = None,
    console: Console | None = None,
    device: str | None = None,
) -> dict:
    key, values = parse_assignment(assignment)
    rows = []
    for value in values:
        lab = open_lab(lab_path, {key: value}, device)
        record = run_variant(lab, run_name(key, value), console, parent=parent)
        metric = (
            lab.spec.hypothesis.metric
            if lab.spec.hypothesis
            else get_task(lab.spec.task.type).default_metric
        )
        rows.append(
            {
                "value": value,
                "id": record["id"],
                "parent": record.get("parent"),
                "metric": metric,
                "score": record["metrics"][metric],
                "seconds": record["training"]["seconds"],
            }
        )
    return {"key": key, "values": values, "runs": rows}
