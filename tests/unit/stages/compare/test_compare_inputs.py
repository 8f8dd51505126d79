"""What `tunelab compare` sets beside what: the hypothesis and rules recorded with the runs,
its record and event, platforms, protocols, parents and data versions that differ, and the
reference among baselines."""

import hashlib
import json

import pytest
from compare_labs import LABELS, PREDS, add_run, make_lab, predictions

from tunelab.core.digest import sha256_file
from tunelab.core.errors import TunelabError
from tunelab.core.lab import Lab
from tunelab.core.store import StoreError, atomic_write_json, read_json, write_jsonl
from tunelab.stages.compare.verdicts import compare


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
    assert after["deltas"].startswith("every delta, interval and margin is signed so that better")
    assert after["rules"]["guardrails"] == [
        {"metric": "f1", "scope": "every_class", "max_drop": 0.05}
    ]


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


def test_another_gpu_model_driver_or_tunelab_is_another_platform_too():
    """Moved from an A100 to an H100 with another driver and tunelab, it was no new platform
    (hV F2); a CPU named by its architecture alone, as records did, has no model to compare."""
    from tunelab.stages.compare.platform import env_differences

    a = env("2.5.1", "cuda") | {"cuda_driver": "535", "tunelab": "0.1.0", "git_commit": "a" * 40}
    a["device"] = {"type": "cuda", "name": "NVIDIA A100", "count": 1}
    b = a | {"cuda_driver": "550", "tunelab": "0.2.0", "git_commit": "b" * 40}
    b["device"] = {"type": "cuda", "name": "NVIDIA H100 80GB HBM3", "count": 8}
    assert env_differences(a, b) == [
        "device NVIDIA A100 -> NVIDIA H100 80GB HBM3",
        "GPU driver 535 -> 550",
        "tunelab 0.1.0 -> 0.2.0",
        f"tunelab commit {'a' * 12} -> {'b' * 12}",
    ]
    old, new = env("2.5.1", "cpu"), env("2.5.1", "cpu")
    old["device"]["name"], new["device"]["name"] = "x86_64", "AMD EPYC 7R13 Processor"
    assert env_differences(old, new) == []
    new["tunelab"], old["git_commit"] = "0.1.0", "c" * 40  # either record silent: no change
    assert env_differences(old, new) == []


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
    files = {"validation.jsonl": digest}
    manifest = {"labels": LABELS, "split_sha256": {"validation": digest}, "files": files}
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
    assert result["rules_note"] is None  # the spec states what the reference was recorded under
    edited = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.01}])
    result = compare(edited)  # judged as before, and the edit is said, not ignored in silence
    assert [g["scope"] for g in result["runs"][-1]["guardrails"]] == ["every_class"]
    assert result["rules_note"].startswith("tunelab.yaml's rules changed since the reference r002")
    assert "(guardrails): compare judges by the recorded ones" in result["rules_note"]


def test_predictions_edited_after_their_run_are_refused_naming_both_hashes(tmp_path):
    """compare judged hand-rewritten predictions; only final and fsck had checked them."""
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    written = predictions({"a": 0.7, "b": 0.7, "c": 0.7})
    lora = add_run(lab, "lora", "variant", written)
    path = lab.store.run_dir(lora) / PREDS
    record = lab.store.read_record(lora) | {"predictions_sha256": sha256_file(path)}
    lab.store.write_record(lora, record)
    assert compare(lab)["runs"][-1]["id"] == lora  # as the run wrote them: judged
    write_jsonl(path, predictions({"a": 1.0, "b": 1.0, "c": 1.0}))  # a better story
    with pytest.raises(StoreError, match=r"changed since run .* wrote it: its record holds"):
        compare(lab)


def test_several_variants_against_one_reference_say_what_choosing_the_best_costs():
    from tunelab.stages.compare.notes import multiplicity

    seeds = {"bootstrap": {"basis": "seeds and examples"}}
    rows = [{"id": "r001-probe"}] + [
        {"id": f"r00{i}-lr", "vs_reference": seeds, "verdict": v}
        for i, v in ((2, "no evidence"), (3, "improved"), (4, "no evidence"))
    ]
    note = multiplicity(rows, "r001-probe")
    assert note.startswith("3 variants were judged against r001-probe, each on its own 95%")
    assert "about 7% of the time, not 2.5%" in note and "`tunelab final`" in note
    assert multiplicity(rows[:2], "r001-probe") is None  # one variant: no choosing
    assert multiplicity([r | {"verdict": "no evidence"} for r in rows], "r001-probe") is None
    # on one seed the 2.5% is the examples' alone: a new seed's luck is not in it (a
    # simulation of 5 such variants read one or more improved 54% of the time, not 12%)
    one = {"bootstrap": {"basis": "examples"}}
    mixed = [rows[0], rows[1], rows[2] | {"vs_reference": one}, rows[3] | {"vs_reference": one}]
    note = multiplicity(mixed, "r001-probe")
    assert ": the one judged over its seeds would read improved by chance 2.5%" in note
    assert "; 2 are judged on one seed, over the examples alone" in note
    only = multiplicity([rows[0], *(r | {"vs_reference": one} for r in rows[1:])], "r001-probe")
    assert "read improved about" not in only and ": 3 are judged on one seed" in only
    # the usual one-seed gain gets the note too, and two variants are already a choice
    two = [rows[0], rows[1] | {"vs_reference": one}, rows[2] | {"vs_reference": one}]
    two[2]["verdict"] = "improved on one seed"
    assert multiplicity(two, "r001-probe").startswith("2 variants were judged against")
