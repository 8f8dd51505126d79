import hashlib
import json
from pathlib import Path

import pytest
import torch

from tunelab.core.digest import sha256_file
from tunelab.core.errors import TunelabError
from tunelab.core.lab import Lab
from tunelab.core.spec import validate_spec
from tunelab.core.store import Store, StoreError, atomic_write_json, read_json, write_jsonl
from tunelab.stages.compare.verdicts import compare
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


def test_class_guardrail_fails_when_one_class_drops_while_average_rises(tmp_path):
    lab = make_lab(
        tmp_path,
        [
            {"metric": "f1", "scope": "every_class", "max_drop": 0.05},
            {"metric": "accuracy", "scope": "overall", "max_drop": 0.05},
        ],
    )
    add_run(lab, "probe", "baseline", predictions({"a": 0.7, "b": 0.7, "c": 0.9}, n=100))
    add_run(lab, "lora", "variant", predictions({"a": 1.0, "b": 1.0, "c": 0.5}, n=100))
    result = compare(lab)
    variant = result["runs"][1]
    assert variant["accuracy"] > result["runs"][0]["accuracy"]
    class_rail, overall_rail = variant["guardrails"]
    assert overall_rail["status"] == "holds" and overall_rail["checks"]["overall"]["low"] > -0.05
    assert class_rail["status"] == "broken"
    assert [k for k, c in class_rail["checks"].items() if c["status"] == "broken"] == ["c"]
    assert class_rail["checks"]["c"]["high"] < -0.05  # the optimistic end is past the limit
    assert variant["verdict"] == "guardrail broken"
    # one seed per arm, no noise record: the reasons say a new seed could move it
    assert any(r.startswith("the guardrail was judged on one seed") for r in variant["reasons"])


def test_a_class_drop_the_size_of_noise_is_unresolved_not_broken(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "recall", "scope": "every_class", "max_drop": 0.05}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.8}))
    add_run(lab, "lora", "variant", predictions({"a": 0.95, "b": 0.95, "c": 0.7}))
    variant = compare(lab)["runs"][-1]
    (rail,) = variant["guardrails"]
    c = rail["checks"]["c"]
    assert c["delta"] < -0.05 < c["high"] and c["low"] < -0.05  # past the limit on the point
    assert rail["status"] == "unresolved" and c["needed_n"] > 90  # 30 c examples: noise
    # the gain is real, but an unresolved guardrail blocks `improved`...
    assert variant["vs_reference"]["bootstrap"]["low"] > 0
    assert variant["verdict"] == "guardrail unresolved"  # a gain, its cost not yet known
    assert any("blocks `improved`: more validation examples, or" in r for r in variant["reasons"])
    # ...unless the user accepts it, with a reason that is recorded
    accepted = compare(lab, accept_unresolved="class c is rare in production")
    assert accepted["runs"][-1]["verdict"] == "improved on one seed"
    assert accepted["rules"]["accepted_unresolved"] == "class c is rare in production"


def test_a_significantly_worse_variant_is_worse_not_broken(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "f1", "scope": "every_class", "max_drop": 0.01}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.9, "b": 0.9, "c": 0.9}, n=100))
    add_run(lab, "lora", "variant", predictions({"a": 0.7, "b": 0.7, "c": 0.7}, n=100))
    variant = compare(lab)["runs"][-1]
    assert variant["vs_reference"]["bootstrap"]["high"] < 0
    # one seed per arm: the table says so, as it does for a gain
    assert variant["verdict"] == "worse on one seed"
    assert variant["guardrails"][0]["status"] == "broken"
    # one seed per arm: a new seed could move a loss as far as a gain, and the reasons say so
    assert any("a new seed alone could move it this far" in r for r in variant["reasons"])


def test_editing_the_spec_after_the_runs_changes_no_verdict(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    add_run(lab, "lora", "variant", predictions({"a": 0.95, "b": 0.95, "c": 0.95}))
    before = compare(lab)
    edited = make_lab(
        tmp_path,
        [{"metric": "accuracy", "scope": "overall", "max_drop": 0.0}],
        {"behaviour": "b", "metric": "accuracy", "min_effect": 0.9},
    )
    after = compare(edited)  # today's spec asks for a 90-point gain: the records do not
    assert [r.get("verdict") for r in after["runs"]] == [r.get("verdict") for r in before["runs"]]
    assert after["runs"][-1]["verdict"] == "improved on one seed" and after["min_effect"] == 0.02
    assert after["rules"]["guardrails"] == [
        {"metric": "f1", "scope": "every_class", "max_drop": 0.05}
    ]
    with pytest.raises(TunelabError, match=r"\['hypothesis.min_effect'\].*recorded with the runs"):
        compare(lab, overrides={"hypothesis.min_effect": 0})


def test_a_variant_recorded_under_other_rules_is_refused_unless_a_reason(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    other = make_lab(
        tmp_path,
        [{"metric": "f1", "scope": "every_class", "max_drop": 0.5}],
        {"behaviour": "b", "metric": "accuracy", "min_effect": 0.0},
    )
    run = add_run(other, "lora", "variant", predictions({"a": 0.95, "b": 0.95, "c": 0.95}))
    with pytest.raises(TunelabError, match=rf"{run} \(hypothesis.min_effect, guardrails\)"):
        compare(lab)
    result = compare(lab, reason="the limit was loosened on purpose")
    assert result["rules"]["reason"] == "the limit was loosened on purpose"
    assert result["rules"]["differing"] == {run: ["hypothesis.min_effect", "guardrails"]}
    assert result["runs"][-1]["guardrails"][0]["max_drop"] == 0.05  # the reference's rules


def test_every_compare_writes_a_record_and_an_event(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    probe = add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    lora = add_run(lab, "lora", "variant", predictions({"a": 0.9, "b": 0.9, "c": 0.9}))
    first, second = compare(lab), compare(lab)
    assert (first["id"], second["id"]) == ("c001", "c002")
    saved = read_json(tmp_path / first["file"])
    assert saved == json.loads(json.dumps(first))
    preds = lab.store.run_dir(lora) / PREDS
    assert saved["inputs"] == [
        {
            "run": probe,
            "predictions_sha256": sha256_file(lab.store.run_dir(probe) / "predictions.jsonl"),
        },
        {"run": lora, "predictions_sha256": hashlib.sha256(preds.read_bytes()).hexdigest()},
    ]
    assert saved["rules"]["hypothesis"]["min_effect"] == 0.02
    events = [e for e in lab.store.events() if e["event"] == "compare"]
    assert [e["comparison"] for e in events] == ["c001", "c002"]
    assert events[0]["verdicts"] == {lora: "improved on one seed"}


def test_without_a_recorded_hypothesis_there_are_metrics_but_no_verdict(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}], None)
    add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    add_run(lab, "lora", "variant", predictions({"a": 0.9, "b": 0.9, "c": 0.9}))
    result = compare(lab)
    variant = result["runs"][-1]
    assert variant["verdict"] is None and "without a hypothesis" in variant["reasons"][0]
    assert result["min_effect"] is None and variant["accuracy"] == pytest.approx(0.9)


def test_clear_gain_with_guardrails_held_is_improved(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}])
    add_run(lab, "majority", "baseline", predictions({"a": 0.5, "b": 0.5, "c": 0.5}))
    add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    add_run(lab, "lora", "variant", predictions({"a": 0.95, "b": 0.95, "c": 0.95}))
    result = compare(lab)
    assert result["reference"] == "r002-probe"  # the strongest baseline
    variant = result["runs"][-1]
    assert variant["verdict"] == "improved on one seed"
    assert variant["vs_reference"]["bootstrap"]["low"] > 0
    assert variant["vs_reference"]["mcnemar"]["broken"] == 0


def test_tiny_gain_is_no_evidence(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.8, "b": 0.8, "c": 0.8}))
    add_run(lab, "lora", "variant", predictions({"a": 0.8, "b": 0.8, "c": 0.8334}))
    variant = compare(lab)["runs"][-1]
    assert variant["verdict"] == "no evidence"
    assert any("below the minimum effect" in r for r in variant["reasons"])


def test_a_small_loss_is_not_called_a_gain_below_the_minimum(tmp_path):
    """A variant 6.7 points below its reference read "the gain is below the minimum effect"."""
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.5}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.9, "b": 0.9, "c": 0.9}))
    add_run(lab, "lora", "variant", predictions({"a": 0.9, "b": 0.9, "c": 0.8}))
    variant = compare(lab)["runs"][-1]
    assert variant["verdict"] == "no evidence" and variant["vs_reference"]["bootstrap"]["delta"] < 0
    assert "the estimate is a loss, not a gain" in variant["reasons"]
    assert not any("gain is below" in r for r in variant["reasons"])


def test_the_same_score_on_every_example_is_not_called_a_loss(tmp_path):
    """A LoRA that changed no answer's score read "the estimate is a loss, not a gain"."""
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.5}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.9, "b": 0.9, "c": 0.9}))
    add_run(lab, "lora", "variant", predictions({"a": 0.9, "b": 0.9, "c": 0.9}))
    variant = compare(lab)["runs"][-1]
    assert variant["verdict"] == "no evidence"
    assert "every example scored the same in both runs: no difference at all" in variant["reasons"]
    assert not any("loss" in r or "includes zero" in r for r in variant["reasons"])


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
    add_run(lab, "probe", "baseline", labelled(ref))
    add_run(lab, "lora", "variant", labelled(new))
    vs = compare(lab)["runs"][-1]["vs_reference"]
    assert vs["flips"]["fixed"] == {"count": 3, "ids": ["e03", "e04", "e07"]}
    assert vs["flips"]["broken"] == {"count": 2, "ids": ["e00", "e08"]}
    assert vs["flips"]["net"] == 1
    assert (vs["mcnemar"]["fixed"], vs["mcnemar"]["broken"]) == (3, 2)


def test_flip_ids_are_capped_at_five(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 1.0}])
    add_run(lab, "probe", "baseline", labelled([False] * 12))
    add_run(lab, "lora", "variant", labelled([True] * 12))
    fixed = compare(lab)["runs"][-1]["vs_reference"]["flips"]["fixed"]
    assert fixed["count"] == 12 and fixed["ids"] == ["e00", "e01", "e02", "e03", "e04"]


def test_a_gain_from_three_examples_is_flagged_as_concentrated(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.8, "b": 0.8, "c": 0.8}))
    add_run(lab, "lora", "variant", predictions({"a": 0.9, "b": 0.8, "c": 0.8}))
    variant = compare(lab)["runs"][-1]
    c = variant["vs_reference"]["concentration"]
    assert c["k"] == 3 and c["n"] == 90 and c["concentrated"]
    assert variant["vs_reference"]["flips"]["net"] == 3
    assert any("handful of examples" in w for w in variant["warnings"])
    assert any("handful of examples" in r for r in variant["reasons"])


def test_a_spread_gain_is_not_concentrated_and_stays_improved(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    add_run(lab, "lora", "variant", predictions({"a": 0.95, "b": 0.95, "c": 0.95}))
    variant = compare(lab)["runs"][-1]
    assert not variant["vs_reference"]["concentration"]["concentrated"]
    assert variant["verdict"] == "improved on one seed"
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
    add_run(lab, "probe", "baseline", same, env=env("2.4.0", "cpu"))
    add_run(lab, "lora", "variant", same, env=env("2.4.0", "cpu"))
    add_run(lab, "gpu", "variant", same, env=env("2.5.1", "cuda"))
    here, there = compare(lab)["runs"][1:]
    assert not here["warnings"]
    (warning,) = there["warnings"]
    assert "torch 2.4.0 -> 2.5.1" in warning and "device cpu -> cuda" in warning
    assert "CUDA build None -> 12.4" in warning and "checks are redone" in warning


def test_a_different_evaluation_protocol_is_flagged(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    same = predictions({"a": 0.8, "b": 0.8, "c": 0.8})
    add_run(lab, "probe", "baseline", same, protocol={"batch_size": 32, "max_length": 32})
    add_run(lab, "lora", "variant", same, protocol={"batch_size": 32, "max_length": 64})
    (warning,) = compare(lab)["runs"][-1]["warnings"]
    assert "different protocol" in warning and "max_length 32 -> 64" in warning


def test_a_variant_is_also_set_beside_its_parent(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    probe = add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    first = add_run(
        lab, "lora", "variant", predictions({"a": 0.8, "b": 0.8, "c": 0.8}), parent=probe
    )
    diff = {"optimizer": [{"key": "training.lr", "parent": 0.005, "child": 0.001}]}
    second = add_run(
        lab,
        "lora-lr",
        "variant",
        predictions({"a": 0.9, "b": 0.9, "c": 0.9}),
        parent=first,
        diff=diff,
        reason="lower lr",
    )
    orphan = add_run(lab, "plain", "variant", predictions({"a": 0.8, "b": 0.8, "c": 0.8}))
    rows = {r["id"]: r for r in compare(lab)["runs"]}
    assert rows[first]["vs_parent"]["run"] == probe
    vs = rows[second]["vs_parent"]
    assert vs["run"] == first and vs["diff"] == diff and vs["reason"] == "lower lr"
    assert vs["bootstrap"]["delta"] == pytest.approx(0.1)
    assert vs["flips"]["fixed"]["count"] == 9 and vs["flips"]["broken"]["count"] == 0
    assert (
        vs["verdict"] in {"improved on one seed", "no evidence"} and vs["guardrails"][0]["passed"]
    )
    assert rows[second]["reason"] == "lower lr" and rows[second]["parent"] == first
    assert rows[second]["vs_reference"]["bootstrap"]["delta"] == pytest.approx(0.3)
    assert "vs_parent" not in rows[orphan] and rows[orphan]["parent"] is None


def test_a_parent_on_another_data_version_gives_a_warning_not_a_comparison(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    old = add_run(lab, "old", "variant", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    record = lab.store.read_record(old)
    lab.store.write_record(old, {**record, "data_version": "v0"})
    add_run(lab, "new", "variant", predictions({"a": 0.7, "b": 0.7, "c": 0.7}), parent=old)
    row = compare(lab)["runs"][-1]
    assert "vs_parent" not in row
    assert any(
        f"parent {old}: no paired comparison" in w and "on data version v0" in w
        for w in row["warnings"]
    )


def processes(world_size: int, strategy: str | None) -> dict:
    return {"processes": {"world_size": world_size, "strategy": strategy}}


def test_a_change_of_processes_or_strategy_is_a_platform_change(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    same = predictions({"a": 0.8, "b": 0.8, "c": 0.8})
    probe = add_run(lab, "probe", "baseline", same)
    one = add_run(lab, "one", "variant", same, parent=probe, training=processes(1, None))
    two = add_run(lab, "two", "variant", same, parent=one, training=processes(2, "ddp"))
    fsdp = add_run(lab, "fsdp", "variant", same, parent=two, training=processes(2, "fsdp"))
    rows = {r["id"]: r for r in compare(lab)["runs"]}
    assert not rows[one]["warnings"]  # a baseline records no processes: nothing to compare
    (warning,) = rows[two]["vs_parent"]["warnings"]
    assert "processes 1 -> 2" in warning and "strategy one process -> ddp" in warning
    assert "checks are redone" in warning
    (warning,) = rows[fsdp]["vs_parent"]["warnings"]
    assert "strategy ddp -> fsdp" in warning and "processes" not in warning.split(":")[1]


def add_version(lab: Lab, version: str, validation: list[dict]) -> None:
    """A data version whose manifest records its validation split's sha256, made current."""
    folder = lab.store.data_dir(version)
    write_jsonl(folder / "validation.jsonl", validation)
    digest = sha256_file(folder / "validation.jsonl")
    manifest = {"labels": LABELS, "split_sha256": {"validation": digest}}
    atomic_write_json(folder / "manifest.json", manifest)
    lab.store.set_current_data(version)
    lab.data = version  # as a command opened after it would read it


def validation_rows(changed: int = 0, added: int = 0, removed: int = 0) -> list[dict]:
    rows = [{"id": p["id"], "text": f"text of {p['id']}", "label": p["gold"]} for p in PREDS_ALL]
    for row in rows[:changed]:
        row["text"] += " (cleaned)"
    rows = rows[removed:]
    return rows + [{"id": f"new{i}", "text": "more", "label": "a"} for i in range(added)]


PREDS_ALL = predictions({"a": 0.6, "b": 0.6, "c": 0.6})


def test_runs_on_two_data_versions_with_the_same_validation_are_paired(tmp_path):
    """One cleaning rule that touched train alone: a new version, the same validation."""
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    add_version(lab, "v1", validation_rows())
    probe = add_run(lab, "probe", "baseline", PREDS_ALL)
    add_version(lab, "v2", validation_rows())  # byte-identical validation
    child = add_run(
        lab,
        "cleaned",
        "variant",
        predictions({"a": 0.9, "b": 0.9, "c": 0.9}),
        data_version="v2",
        parent=probe,
    )
    result = compare(lab)
    assert result["data_version"] == "v2" and result["reference"] == probe
    rows = {r["id"]: r for r in result["runs"]}
    assert "validation split is identical to v2's" in rows[probe]["data_note"]
    assert "data_note" not in rows[child]
    assert rows[child]["vs_parent"]["run"] == probe
    assert rows[child]["vs_reference"]["flips"]["fixed"]["count"] == 27
    assert not rows[child]["warnings"]


def test_a_changed_validation_split_is_refused_with_what_changed(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    add_version(lab, "v1", validation_rows())
    old = add_run(lab, "probe", "baseline", PREDS_ALL)
    add_version(lab, "v2", validation_rows(changed=3, added=2, removed=1))
    probe = add_run(lab, "probe2", "baseline", PREDS_ALL, data_version="v2")
    child = add_run(lab, "lora", "variant", PREDS_ALL, data_version="v2", parent=old)
    rows = {r["id"]: r for r in compare(lab)["runs"]}
    assert old not in rows and rows[child]["against"] == probe
    (warning,) = rows[child]["warnings"]
    # the first changed row was also removed: 2 of the 3 changed remain
    assert "differs between data versions v1 and v2 (2 added, 1 removed, 2 changed)" in warning
    assert "data.eval_from: v1" in warning and "vs_parent" not in rows[child]
    with pytest.raises(StoreError, match=r"--against .*2 added, 1 removed, 2 changed"):
        compare(lab, against=old)


def test_a_guardrail_on_its_limit_says_how_far_past_the_examples_it_would_need():
    from tunelab.stages.compare.guardrails import describe
    from tunelab.views.compare import guardrail_line

    near = {"delta": -0.046, "low": -0.142, "high": 0.039, "status": "unresolved"}
    rail = {"metric": "f1", "scope": "every_class", "max_drop": 0.05, "status": "unresolved"}
    rail |= {"worst": "politics", "checks": {"politics": near}}
    near |= {"needed_n": 557278, "examples": 91}  # the interval's centre sits on the limit
    assert "~557,278 examples (6,124x these 91) would resolve it" in describe(rail)
    said = guardrail_line(rail)
    assert "~557,278 validation examples (6,124x these 91) would resolve it" in said
    near |= {"needed_n": 173}  # within reach: the count alone
    assert "; ~173 validation examples would resolve it" in guardrail_line(rail)
    assert ", ~173 examples would resolve it;" in describe(rail)


def test_of_equally_strong_baselines_the_newest_is_the_reference(tmp_path):
    """A baseline measured again after the guardrails changed (the same score: a zero-shot
    model that fails every answer) is the one the variants recorded since are judged against;
    the oldest was, and they were refused as "recorded under other rules"."""
    first = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.05}])
    old = add_run(first, "majority", "baseline", predictions({"a": 1.0, "b": 0.0, "c": 0.0}))
    lab = make_lab(tmp_path, [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}])
    new = add_run(lab, "majority", "baseline", predictions({"a": 1.0, "b": 0.0, "c": 0.0}))
    add_run(lab, "lora", "variant", predictions({"a": 1.0, "b": 0.5, "c": 0.5}))
    result = compare(lab)
    assert (old, result["reference"]) == ("r001-majority", new)
    (variant,) = [r for r in result["runs"] if r["kind"] == "variant"]
    assert [g["scope"] for g in variant["guardrails"]] == ["every_class"]


def test_a_variant_that_gives_every_example_one_answer_is_said_to_separate_none():
    from tunelab.stages.compare.collapse import collapse_warnings

    one = {f"x{i}": {"id": f"x{i}", "gold": LABELS[i % 3], "predicted": "a"} for i in range(9)}
    some = {k: {**p, "predicted": p["gold"]} for k, p in one.items()}
    every = {  # multilabel: every label for every example, as a head at its start gives
        f"x{i}": {"id": f"x{i}", "gold": LABELS[: 1 + i % 3], "predicted": list(LABELS)}
        for i in range(9)
    }
    preds = {"r1-one": one, "r2-some": some, "r3-every": every}
    arm = [{"id": "r1-one"}, {"id": "r2-some"}, {"id": "r3-every"}]
    said = collapse_warnings(arm, preds.__getitem__, LABELS)
    assert len(said) == 2 and said[0].startswith("r1-one gives all 9 validation examples one")
    assert "answer ('a') where they have 3 different ones: it separates none of them" in said[0]
    assert said[1].startswith("r3-every gives all 9 validation examples one answer (all 3 labels)")
    same_gold = {k: {**p, "gold": "a"} for k, p in one.items()}  # nothing to separate
    assert collapse_warnings([{"id": "r"}], lambda _: same_gold, LABELS) == []


def test_compare_warns_of_a_variant_that_predicts_one_class(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.05}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.7, "b": 0.7, "c": 0.7}))
    flat = [{**p, "predicted": "a"} for p in predictions({"a": 1.0, "b": 1.0, "c": 1.0})]
    add_run(lab, "lora", "variant", flat)
    (variant,) = [r for r in compare(lab)["runs"] if r["kind"] == "variant"]
    assert any(
        "r002-lora gives all 90 validation examples one answer" in w for w in variant["warnings"]
    )


def test_a_guardrail_that_allows_no_drop_says_so_not_minus_zero():
    """The template's `accuracy overall, max_drop: 0.0` read "limit -0.0"."""
    from tunelab.stages.compare.guardrails import describe
    from tunelab.views.compare import guardrail_line

    check = {"delta": -0.067, "low": -0.156, "high": 0.0, "status": "unresolved"}
    rail = {"metric": "accuracy", "scope": "overall", "max_drop": 0.0, "status": "unresolved"}
    rail |= {"worst": "overall", "checks": {"overall": check}}
    assert guardrail_line(rail).endswith("-6.7 (-15.6, +0.0) points, limit 0 (no drop)")
    assert describe(rail).endswith("; limit 0 (no drop)") and "limit -0" not in describe(rail)


def test_a_no_drop_guardrail_holds_where_no_example_dropped(tmp_path):
    """Two LoRAs with 100% JSON validity each read "unresolved: +0.0 (+0.0, +0.0), limit 0 (no
    drop); more seeds would resolve it", and that blocked `improved`."""
    from tunelab.stages.compare.guardrails import status_of

    assert status_of({"low": 0.0, "high": 0.0}, 0.0) == "holds"  # the same on every example
    assert status_of({"low": -0.02, "high": 0.1}, 0.02) == "holds"  # at the limit: allowed
    assert status_of({"low": -0.01, "high": 0.0}, 0.0) == "unresolved"  # some resample drops
    assert status_of({"low": -0.2, "high": -0.05}, 0.02) == "broken"
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.0}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.9, "b": 0.9, "c": 0.9}))
    add_run(lab, "lora", "variant", predictions({"a": 0.9, "b": 0.9, "c": 0.9}))
    (rail,) = compare(lab)["runs"][-1]["guardrails"]
    assert rail["status"] == "holds", rail


def test_a_document_scored_better_is_not_said_to_be_fixed():
    """A pretrain lab's bits per byte read "fixed 45, broken 0": a document is scored better
    or worse, not fixed; an answer still is."""
    from tunelab.views.compare import _flips_line

    flips = {"fixed": {"count": 2, "ids": ["a", "b"]}, "broken": {"count": 0, "ids": []}}
    assert _flips_line({"metric": "bits_per_byte", "flips": flips}) == "better 2 (a, b), worse 0"
    assert _flips_line({"metric": "accuracy", "flips": flips}) == "fixed 2 (a, b), broken 0"


def test_every_verdict_word_has_a_colour_in_the_console_and_a_tone_in_the_report():
    from tunelab.stages.compare.rules import VERDICTS
    from tunelab.stages.report.charts import TONES
    from tunelab.views.style import VERDICT_STYLE

    assert set(VERDICTS) <= set(VERDICT_STYLE) and set(VERDICTS) <= set(TONES)
    assert "worse on one seed" in VERDICTS  # a loss on one seed is said as one, as a gain is
