from pathlib import Path

import pytest
import torch

from tunelab.core.lab import Lab
from tunelab.core.spec import validate_spec
from tunelab.core.store import Store, atomic_write_json, write_jsonl
from tunelab.stages.compare.verdicts import compare
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


def add_run(store: Store, name: str, kind: str, preds: list[dict], **extra) -> str:
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
            **extra,
        },
    )
    return run_id


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


def labelled(right: list[bool]) -> list[dict]:
    """Hand-made predictions: example i has gold LABELS[i % 3] and is right when right[i]."""
    rows = []
    for i, ok in enumerate(right):
        gold = LABELS[i % 3]
        wrong = LABELS[(i + 1) % 3]
        rows.append({"id": f"e{i:02d}", "gold": gold, "predicted": gold if ok else wrong})
    return rows


def test_flips_are_counted_and_named_on_a_hand_made_case(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 1.0}])
    ref = [True, True, True, False, False, False, True, False, True]
    new = [False, True, True, True, True, False, True, True, False]
    add_run(lab.store, "probe", "baseline", labelled(ref))
    add_run(lab.store, "lora", "variant", labelled(new))
    vs = compare(lab)["runs"][-1]["vs_reference"]
    assert vs["flips"]["fixed"] == {"count": 3, "ids": ["e03", "e04", "e07"]}
    assert vs["flips"]["broken"] == {"count": 2, "ids": ["e00", "e08"]}
    assert vs["flips"]["net"] == 1
    assert (vs["mcnemar"]["fixed"], vs["mcnemar"]["broken"]) == (3, 2)


def test_flip_ids_are_capped_at_five(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 1.0}])
    add_run(lab.store, "probe", "baseline", labelled([False] * 12))
    add_run(lab.store, "lora", "variant", labelled([True] * 12))
    fixed = compare(lab)["runs"][-1]["vs_reference"]["flips"]["fixed"]
    assert fixed["count"] == 12 and fixed["ids"] == ["e00", "e01", "e02", "e03", "e04"]


def test_a_gain_from_three_examples_is_flagged_as_concentrated(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    add_run(lab.store, "probe", "baseline", predictions({"a": 0.8, "b": 0.8, "c": 0.8}))
    add_run(lab.store, "lora", "variant", predictions({"a": 0.9, "b": 0.8, "c": 0.8}))
    variant = compare(lab)["runs"][-1]
    c = variant["vs_reference"]["concentration"]
    assert c["k"] == 3 and c["n"] == 90 and c["concentrated"]
    assert variant["vs_reference"]["flips"]["net"] == 3
    assert any("handful of examples" in w for w in variant["warnings"])
    assert any("handful of examples" in r for r in variant["reasons"])


def test_a_spread_gain_is_not_concentrated_and_stays_improved(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}])
    add_run(lab.store, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    add_run(lab.store, "lora", "variant", predictions({"a": 0.95, "b": 0.95, "c": 0.95}))
    variant = compare(lab)["runs"][-1]
    assert not variant["vs_reference"]["concentration"]["concentrated"]
    assert variant["verdict"] == "improved"
    assert not any("handful" in w for w in variant["warnings"] + variant["reasons"])


def env(torch: str, device: str) -> dict:
    return {
        "packages": {"torch": torch, "transformers": "4.50.0", "peft": "0.15.0"},
        "torch_cuda": None if device == "cpu" else "12.4",
        "torch_hip": None,
        "device": {"type": device, "name": "x", "count": 1},
    }


def test_runs_from_different_platforms_are_flagged(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    same = predictions({"a": 0.8, "b": 0.8, "c": 0.8})
    add_run(lab.store, "probe", "baseline", same, env=env("2.4.0", "cpu"))
    add_run(lab.store, "lora", "variant", same, env=env("2.4.0", "cpu"))
    add_run(lab.store, "gpu", "variant", same, env=env("2.5.1", "cuda"))
    here, there = compare(lab)["runs"][1:]
    assert not here["warnings"]
    (warning,) = there["warnings"]
    assert "torch 2.4.0 -> 2.5.1" in warning and "device cpu -> cuda" in warning
    assert "CUDA build None -> 12.4" in warning and "checks are redone" in warning


def test_a_different_evaluation_protocol_is_flagged(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    same = predictions({"a": 0.8, "b": 0.8, "c": 0.8})
    add_run(lab.store, "probe", "baseline", same, protocol={"batch_size": 32, "max_length": 32})
    add_run(lab.store, "lora", "variant", same, protocol={"batch_size": 32, "max_length": 64})
    (warning,) = compare(lab)["runs"][-1]["warnings"]
    assert "different protocol" in warning and "max_length 32 -> 64" in warning


def test_a_variant_is_also_set_beside_its_parent(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    probe = add_run(lab.store, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    first = add_run(
        lab.store, "lora", "variant", predictions({"a": 0.8, "b": 0.8, "c": 0.8}), parent=probe
    )
    diff = {"optimizer": [{"key": "training.lr", "parent": 0.005, "child": 0.001}]}
    second = add_run(
        lab.store,
        "lora-lr",
        "variant",
        predictions({"a": 0.9, "b": 0.9, "c": 0.9}),
        parent=first,
        diff=diff,
        reason="lower lr",
    )
    orphan = add_run(lab.store, "plain", "variant", predictions({"a": 0.8, "b": 0.8, "c": 0.8}))
    rows = {r["id"]: r for r in compare(lab)["runs"]}
    assert rows[first]["vs_parent"]["run"] == probe
    vs = rows[second]["vs_parent"]
    assert vs["run"] == first and vs["diff"] == diff and vs["reason"] == "lower lr"
    assert vs["bootstrap"]["delta"] == pytest.approx(0.1)
    assert vs["flips"]["fixed"]["count"] == 9 and vs["flips"]["broken"]["count"] == 0
    assert vs["verdict"] in {"improved", "no evidence"} and vs["guardrails"][0]["passed"]
    assert rows[second]["reason"] == "lower lr" and rows[second]["parent"] == first
    assert rows[second]["vs_reference"]["bootstrap"]["delta"] == pytest.approx(0.3)
    assert "vs_parent" not in rows[orphan] and rows[orphan]["parent"] is None


def test_a_parent_on_another_data_version_gives_a_warning_not_a_comparison(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    add_run(lab.store, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    old = add_run(lab.store, "old", "variant", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    record = lab.store.read_record(old)
    lab.store.write_record(old, {**record, "data_version": "v0"})
    add_run(lab.store, "new", "variant", predictions({"a": 0.7, "b": 0.7, "c": 0.7}), parent=old)
    row = compare(lab)["runs"][-1]
    assert "vs_parent" not in row
    assert any(f"parent {old} is on data version v0" in w for w in row["warnings"])
