from pathlib import Path

import torch

from tunelab.compare import compare
from tunelab.lab import Lab
from tunelab.spec import validate_spec
from tunelab.store import Store, atomic_write_json, write_jsonl
from tunelab.tasks.classification import metrics

LABELS = ["a", "b", "c"]


def predictions(correct_rate: dict[str, float]) -> list[dict]:
    """30 examples per label; the first share of each label is predicted right."""
    rows = []
    for label in LABELS:
        wrong = LABELS[(LABELS.index(label) + 1) % 3]
        for i in range(30):
            right = i < round(30 * correct_rate[label])
            rows.append(
                {"id": f"{label}{i:02d}", "gold": label, "predicted": label if right else wrong}
            )
    return rows


def add_run(store: Store, name: str, kind: str, preds: list[dict]) -> None:
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
        },
    )


def make_lab(tmp_path: Path, guardrails: list[dict]) -> Lab:
    spec = validate_spec(
        {
            "hypothesis": {"behaviour": "b", "metric": "accuracy", "min_effect": 0.02},
            "guardrails": guardrails,
            "data": {"sources": [{"type": "jsonl", "path": "d"}]},
            "model": {"path": "m"},
        }
    )
    store = Store(tmp_path)
    store.set_current_data("v1")
    atomic_write_json(store.data_dir("v1") / "manifest.json", {"labels": LABELS})
    return Lab(tmp_path, spec, store, torch.device("cpu"))


def test_class_guardrail_fails_when_one_class_drops_while_average_rises(tmp_path):
    lab = make_lab(
        tmp_path,
        [
            {"metric": "f1", "scope": "every_class", "max_drop": 0.05},
            {"metric": "accuracy", "scope": "overall", "max_drop": 0.0},
        ],
    )
    add_run(lab.store, "probe", "baseline", predictions({"a": 0.8, "b": 0.8, "c": 0.8}))
    add_run(lab.store, "lora", "variant", predictions({"a": 1.0, "b": 1.0, "c": 0.5}))
    result = compare(lab)
    variant = result["runs"][1]
    assert variant["accuracy"] > result["runs"][0]["accuracy"]
    class_rail, overall_rail = variant["guardrails"]
    assert overall_rail["passed"]
    assert not class_rail["passed"]
    assert list(class_rail["failing"]) == ["c"]
    assert variant["verdict"] == "guardrail broken"


def test_clear_gain_with_guardrails_held_is_improved(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}])
    add_run(lab.store, "majority", "baseline", predictions({"a": 0.5, "b": 0.5, "c": 0.5}))
    add_run(lab.store, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    add_run(lab.store, "lora", "variant", predictions({"a": 0.95, "b": 0.95, "c": 0.95}))
    result = compare(lab)
    assert result["reference"] == "r002-probe"  # the strongest baseline
    variant = result["runs"][-1]
    assert variant["verdict"] == "improved"
    assert variant["vs_reference"]["bootstrap"]["low"] > 0
    assert variant["vs_reference"]["mcnemar"]["broken"] == 0


def test_tiny_gain_is_no_evidence(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    add_run(lab.store, "probe", "baseline", predictions({"a": 0.8, "b": 0.8, "c": 0.8}))
    add_run(lab.store, "lora", "variant", predictions({"a": 0.8, "b": 0.8, "c": 0.8334}))
    variant = compare(lab)["runs"][-1]
    assert variant["verdict"] == "no evidence"
    assert any("below the minimum effect" in r for r in variant["reasons"])
