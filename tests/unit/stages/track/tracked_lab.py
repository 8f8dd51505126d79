"""A small lab written by hand through the store, for the `track` tests (imported by them, not
a conftest.py: the suite's `from conftest import ...` must find tests/conftest.py): two
baselines, a judged LoRA run with its loss history, a run still training (its `history.jsonl`
cut by a kill mid-line), a comparison and a report page. No model is loaded."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
import yaml

from tunelab.core.spec import SPEC_FILE, validate_spec
from tunelab.core.store import Store, now

SPEC = {
    "hypothesis": {"behaviour": "LoRA sorts tickets", "metric": "accuracy", "min_effect": 0.02},
    "guardrails": [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}],
    "data": {"sources": [{"type": "jsonl", "path": "d"}]},
    "model": {"path": "m"},
    "training": {"lr": 1e-3, "budget": {"steps": 4}},
}
CREATED = "2026-11-30T09:00:00+00:00"
ENDED = "2026-11-30T09:05:00+00:00"
STEPS = [
    {"step": s, "loss": 1.2 / s, "lr": 1e-3, "grad_norm": 0.5, "tokens": 64 * s, "seconds": s}
    for s in range(1, 5)
]


def metrics(accuracy: float) -> dict:
    """A classification metrics record: rates, per class (one label needs fitting to MLflow's
    names) and the confusion matrix, which is not a number and stays out."""
    per_class = {
        label: {"precision": accuracy, "recall": accuracy, "f1": accuracy, "support": 10}
        for label in ("billing", "food & drink")
    }
    confusion = {"labels": ["billing", "food & drink"], "matrix": [[5, 5], [5, 5]]}
    return {"accuracy": accuracy, "macro_f1": accuracy, "per_class": per_class, "n": 20} | {
        "confusion": confusion
    }


def write_run(store: Store, name: str, kind: str, status: str, **extra) -> str:
    run_id, _ = store.new_run(name)
    record = {
        "id": run_id,
        "name": name,
        "kind": kind,
        "status": status,
        "created": CREATED,
        "data_version": "v1",
        "task": "classification",
        "method": name,
        "spec": validate_spec(SPEC).to_dict(),
        "protocol": {"split": "validation"},
        **extra,
    }
    if status != "running":
        record["ended"] = ENDED
    store.write_record(run_id, record)
    return run_id


def finish(store: Store, run_id: str, accuracy: float = 0.9) -> None:
    """The training run ends: its whole history and metrics go into its record."""
    record = store.read_record(run_id)
    record |= {"status": "completed", "ended": ENDED, "metrics": metrics(accuracy)}
    record["training"] = {"steps": 4, "history": STEPS}
    store.write_record(run_id, record, "run_completed")


def build(path: Path, first: str = "majority") -> Store:
    """The lab; `first` names its first run (so its first event, and its identity)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / SPEC_FILE).write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    store = Store(path)
    majority = write_run(store, first, "baseline", "completed", metrics=metrics(0.5))
    probe = write_run(store, "probe", "baseline", "completed", metrics=metrics(0.7))
    lora = write_run(
        store,
        "lora",
        "variant",
        "completed",
        parent=probe,
        metrics=metrics(0.9),
        training={"steps": 4, "history": STEPS},
    )
    here = {"pid": os.getpid(), "host": socket.gethostname()}
    live = write_run(store, "live", "variant", "running", parent=probe, process=here)
    lines = "".join(json.dumps(s) + "\n" for s in STEPS[:2])
    (store.runs_dir / live / "history.jsonl").write_text(lines + '{"step": 3, "lo')
    (store.runs_dir / live / "heartbeat.json").write_text(json.dumps({"time": now()}))
    boot = {"delta": 0.2, "low": 0.1, "high": 0.3, "basis": "examples"}
    row = {"id": lora, "verdict": "improved", "against": probe}
    row["vs_reference"] = {"metric": "accuracy", "bootstrap": boot}
    path_c = store.root / "comparisons" / "c001.json"
    path_c.parent.mkdir(parents=True, exist_ok=True)
    comparison = {
        "id": "c001",
        "created": ENDED,
        "file": ".tunelab/comparisons/c001.json",
        "inputs": [{"run": r, "predictions_sha256": "0" * 64} for r in (majority, probe, lora)],
        "runs": [{"id": majority}, {"id": probe}, row],
        "reference": probe,
    }
    store.save(path_c, comparison, "compare")
    (path / "lab-report.html").write_text("<html><body>the lab</body></html>\n")
    return store


@pytest.fixture
def lab(tmp_path) -> Store:
    return build(tmp_path / "tickets")


@pytest.fixture
def finished():
    """`finish(store, run_id)`: the running run completes."""
    return finish


@pytest.fixture
def build_lab():
    """`build(path, first)`: another lab like `lab`, told apart by its first run's name."""
    return build
