"""Labs for the comparison's tests: three labels, predictions right at a chosen rate per
label, completed runs recorded under the lab's spec."""

from pathlib import Path

import torch

from tunelab.core.lab import Lab
from tunelab.core.spec import validate_spec
from tunelab.core.store import Store, atomic_write_json, write_jsonl
from tunelab.tasks.classification import metrics

LABELS = ["a", "b", "c"]
PREDS = "predictions.jsonl"
HYPOTHESIS = {"behaviour": "b", "metric": "accuracy", "min_effect": 0.02}


def predictions(correct_rate: dict[str, float], n: int = 30) -> list[dict]:
    """`n` examples per label; the first share of each label is predicted right."""
    rows = []
    for label in LABELS:
        wrong = LABELS[(LABELS.index(label) + 1) % 3]
        for i in range(n):
            right = i < round(n * correct_rate[label])
            rows.append(
                {"id": f"{label}{i:02d}", "gold": label, "predicted": label if right else wrong}
            )
    return rows


def add_run(lab: Lab, name: str, kind: str, preds: list[dict], **extra) -> str:
    """A completed run recorded under the lab's spec (its frozen hypothesis and guardrails)."""
    store = lab.store
    run_id, run_dir = store.new_run(name)
    write_jsonl(run_dir / "predictions.jsonl", preds)
    m = metrics([p["gold"] for p in preds], [p["predicted"] for p in preds], LABELS)
    store.write_record(
        run_id,
        {
            "id": run_id,
            "name": name,
            "kind": kind,
            "status": "completed",
            "data_version": "v1",
            "metrics": m,
            "created": "now",
            "spec": lab.spec.to_dict(),
            **extra,
        },
    )
    return run_id


def make_lab(tmp_path: Path, guardrails: list[dict], hypothesis: dict | None = HYPOTHESIS) -> Lab:
    spec = validate_spec(
        {
            **({"hypothesis": hypothesis} if hypothesis else {}),
            "guardrails": guardrails,
            "data": {"sources": [{"type": "jsonl", "path": "d"}]},
            "model": {"path": "m"},
        }
    )
    store = Store(tmp_path)
    store.set_current_data("v1")
    atomic_write_json(store.data_dir("v1") / "manifest.json", {"labels": LABELS})
    return Lab(tmp_path, spec, store, torch.device("cpu"))
