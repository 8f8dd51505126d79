"""`tunelab fsck` through the CLI: clean on a fresh lab, then each planted fault found and named,
and `--repair` as the only way past an edited log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import tl
from tunelab.cli import main


def test_fsck_is_clean_then_finds_every_planted_fault(make_lab, capsys):
    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"], ["run", "--name", "lora"], ["compare"]):
        assert tl(capsys, *command, *where)[0] == 0
    code, clean = tl(capsys, "fsck", *where)
    assert code == 0 and clean["passed"] and clean["problems"] == []
    assert clean["checked"]["data_files"] >= 6 and clean["checked"]["comparison_inputs"] == 2
    # 3 runs, 1 comparison and the data version's manifest, each vouched for by its event
    assert clean["checked"]["records"] == 5 and clean["not_checked"] == []

    store = lab / ".tunelab"
    (version,) = [p for p in (store / "data").iterdir() if p.is_dir()]
    with (version / "test.jsonl").open("a") as f:  # a tampered seal
        f.write('{"id": "planted", "text": "x", "label": "sport"}\n')
    run = next(p for p in (store / "runs").iterdir() if p.name.endswith("-lora"))
    with (run / "predictions.jsonl").open("a") as f:
        f.write("\n")
    weights = run / "weights" / "adapter_model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 1  # one byte of the trained weights
    weights.write_bytes(bytes(raw))
    (run / "weights" / "adapter_config.json").unlink()
    comparison = store / "comparisons" / "c001.json"
    edited = json.loads(comparison.read_text()) | {"reference": run.name}
    comparison.write_text(json.dumps(edited))
    (store / "runs" / "r099-ghost").mkdir()
    (store / "comparisons" / ".c009.json.tmp").write_text("{}")
    log = (store / "events.jsonl").read_text().splitlines()
    log[-2] = log[-2].replace('"event"', '"planted": true, "event"', 1)
    (store / "events.jsonl").write_text("\n".join(log) + "\n")

    code, found = tl(capsys, "fsck", *where)
    assert code == 1 and not found["passed"]
    by_check = {}
    for p in found["problems"]:
        by_check.setdefault(p["check"], []).append(p)
    assert "sealed test split was changed" in by_check["data"][0]["problem"]
    assert by_check["comparison"][0]["path"].endswith("-lora/predictions.jsonl")
    runs = {p["path"]: p["problem"] for p in by_check["runs"]}
    run_path = f".tunelab/runs/{run.name}/weights"
    assert "changed since the run wrote it" in runs[f"{run_path}/adapter_model.safetensors"]
    assert runs[f"{run_path}/adapter_config.json"] == "missing"
    assert ".tunelab/runs/r099-ghost" in runs
    (record,) = by_check["records"]
    assert record["path"] == ".tunelab/comparisons/c001.json"
    assert by_check["leftover"][0]["path"] == ".tunelab/comparisons/.c009.json.tmp"
    (line,) = by_check["log"]
    assert line["path"] == f".tunelab/events.jsonl:{len(log)}"

    code, refused = tl(capsys, "compare", *where, "--reason", "trust me")
    assert code == 2 and "the event log changed" in refused["error"]  # --reason cannot pass it
    code, err = tl(capsys, "fsck", *where, "--repair")
    assert code == 2 and "--reason" in err["error"]
    code, repaired = tl(capsys, "fsck", *where, "--repair", "--reason", "restored by hand")
    assert not {"log", "records"} & {p["check"] for p in repaired["problems"]}
    assert repaired["log"]["breaks"][0]["reason"] == "restored by hand"
    assert Path(lab, ".tunelab/events.jsonl").read_text().count("chain_break") == 1


def test_a_log_rewritten_whole_is_told_from_the_bundle(make_lab, capsys):
    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"], ["run", "--name", "lora"], ["compare"]):
        assert tl(capsys, *command, *where)[0] == 0
    code, bundle = tl(capsys, "export", "r003-lora", *where)
    assert code == 0, bundle
    info = json.loads((Path(bundle["bundle"]) / "tunelab.json").read_text())
    assert info["lab_log"]["head"] and info["lab_log"]["lines"] > 3
    assert tl(capsys, "fsck", *where)[1]["passed"]
    # a whole new log, a consistent chain of its own: only the bundle's anchor can tell
    from tunelab.core.store import Store

    store = Store(lab)
    store.log_path.unlink()
    store.log_event("data")
    code, found = tl(capsys, "fsck", *where)
    # and the data version the new log does not name
    assert code == 1 and {p["check"] for p in found["problems"]} == {"bundle", "records", "data"}
    anchor = next(p for p in found["problems"] if p["check"] == "bundle")
    assert "its past was rewritten" in anchor["problem"]
    unlogged = [p["path"] for p in found["problems"] if p["check"] == "records"]
    assert ".tunelab/runs/r003-lora/record.json" in unlogged  # the new log wrote none of them
    card = Path(bundle["bundle"]) / "README.md"
    card.write_text(card.read_text() + "edited after the export\n")
    code, found = tl(capsys, "fsck", *where)
    named = {p["path"]: p["problem"] for p in found["problems"] if p["check"] == "bundle"}
    assert named["bundles/r003-lora/README.md"] == "changed since the export"


def test_a_deleted_log_and_an_unreadable_record_are_named_not_crashed_on(make_lab, capsys):
    """Deleting the log turned every record check off ("clean"), so an edited metric went into
    a bundle; a record cut short crashed fsck, runs and report with a JSONDecodeError."""
    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"], ["run", "--name", "lora"], ["compare"]):
        assert tl(capsys, *command, *where)[0] == 0
    store = lab / ".tunelab"
    record = store / "runs" / "r003-lora" / "record.json"
    edited = json.loads(record.read_text())
    edited["metrics"]["macro_f1"] = 0.99
    record.write_text(json.dumps(edited))
    (store / "events.jsonl").unlink()
    code, found = tl(capsys, "fsck", *where)
    assert code == 1
    unlogged = {p["path"] for p in found["problems"] if p["check"] == "records"}
    assert ".tunelab/runs/r003-lora/record.json" in unlogged
    assert ".tunelab/comparisons/c001.json" in unlogged
    code, refused = tl(capsys, "export", "r003-lora", *where)  # it had exported 0.99 as true
    assert code == 2 and "record.json in no event of the log" in refused["error"]
    code, listed = tl(capsys, "runs", *where)
    doubt = {r["id"]: r["doubt"] for r in listed}
    assert doubt["r003-lora"] == "in no event of the log"
    code, repaired = tl(capsys, "fsck", *where, "--repair", "--reason", "log lost in a move")
    assert code == 0 and repaired["passed"], repaired["problems"]
    assert not any(r["doubt"] for r in tl(capsys, "runs", *where)[1])
    edited["metrics"]["macro_f1"] = 0.98
    record.write_text(json.dumps(edited))
    doubt = {r["id"]: r["doubt"] for r in tl(capsys, "runs", *where)[1]}
    assert doubt["r003-lora"] == "edited after the log wrote it"
    code, page = tl(capsys, "report", *where)
    html = Path(lab, page["file"]).read_text()
    assert code == 0 and "past is not as its event log wrote it (1 problem(s)" in html

    record.write_bytes(record.read_bytes()[:100])
    code, found = tl(capsys, "fsck", *where)
    assert code == 1
    (cut,) = [p for p in found["problems"] if p["problem"].startswith("not readable JSON")]
    assert cut["path"] == ".tunelab/runs/r003-lora/record.json"
    code, refused = tl(capsys, "runs", *where)
    assert code == 2 and "r003-lora/record.json: not readable JSON" in refused["error"]


def test_export_final_and_compare_refuse_a_run_whose_files_changed(make_lab, capsys):
    """A weights file flipped by one byte went into a bundle that verified, and `final` opened
    the seal with it; a deleted predictions file crashed compare with a FileNotFoundError."""
    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"], ["run", "--name", "lora"], ["compare"]):
        assert tl(capsys, *command, *where)[0] == 0
    run = lab / ".tunelab" / "runs" / "r003-lora"
    weights = run / "weights" / "adapter_model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 1
    weights.write_bytes(bytes(raw))
    code, refused = tl(capsys, "export", "r003-lora", *where)
    assert code == 2 and "weights/adapter_model.safetensors changed since" in refused["error"]
    assert not (lab / "bundles" / "r003-lora").exists()
    code, refused = tl(capsys, "final", "r003-lora", *where, "--reason", "x")
    assert code == 2 and "run r003-lora's files are not as it wrote them" in refused["error"]
    assert not (lab / ".tunelab" / "finals").exists() or not any(
        (lab / ".tunelab" / "finals").iterdir()
    )  # the seal was not opened
    (run / "predictions.jsonl").unlink()
    code, refused = tl(capsys, "compare", *where)
    assert code == 2 and "r003-lora/predictions.jsonl is missing" in refused["error"]


def test_an_edited_split_is_refused_and_the_advice_rebuilds_it(make_lab, capsys):
    """A label edited in train.jsonl trained a run recorded on a version it no longer was;
    fsck saw it, every other command used it."""
    lab = make_lab()
    where = ["--lab", str(lab)]
    code, data = tl(capsys, "data", *where)
    assert code == 0
    folder = lab / ".tunelab" / "data" / data["version"]
    train = folder / "train.jsonl"
    rows = train.read_text().splitlines()
    row = json.loads(rows[0])
    row["label"] = "business" if row["label"] != "business" else "sport"
    rows[0] = json.dumps(row)
    train.write_text("\n".join(rows) + "\n")
    code, refused = tl(capsys, "run", "--name", "lora", *where)
    assert code == 2 and "train.jsonl: changed since data version" in refused["error"]
    assert not list((lab / ".tunelab" / "runs").glob("*/record.json"))
    code, again = tl(capsys, "data", *where)  # the advice: build it again
    assert code == 0 and again["version"] == data["version"]
    assert again["rewritten"] == ["train.jsonl"]
    assert tl(capsys, "baseline", *where)[0] == 0


def test_a_data_version_the_store_names_but_lost_is_named(make_lab, capsys):
    """CURRENT pointing nowhere, and a whole version removed under its runs, read 'clean'."""
    import shutil

    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"]):
        assert tl(capsys, *command, *where)[0] == 0
    data = lab / ".tunelab" / "data"
    version = (data / "CURRENT").read_text().strip()
    shutil.rmtree(data / version)
    code, found = tl(capsys, "fsck", *where)
    gone = {p["path"]: p["problem"] for p in found["problems"] if p["check"] == "data"}
    assert (
        code == 1
        and gone[".tunelab/data/CURRENT"] == f"names data version {version}, which is gone"
    )
    assert len(gone) == 1  # named once, by the first that names it
    (data / "CURRENT").write_text("deadbeef0000")
    code, found = tl(capsys, "fsck", *where)
    gone = {p["path"]: p["problem"] for p in found["problems"] if p["check"] == "data"}
    assert gone[".tunelab/data/CURRENT"] == "names data version deadbeef0000, which is gone"
    assert gone[".tunelab/runs/r001-majority/record.json"].endswith(f"{version}, which is gone")
    assert tl(capsys, "data", *where)[0] == 0  # the advice: the same sources build it again
    assert tl(capsys, "fsck", *where)[1]["passed"]
    (data / "CURRENT").write_text("../runs/r001-majority\n")  # a path: it read "gone" (hS F6)
    code, found = tl(capsys, "fsck", *where)
    named = {p["path"]: p for p in found["problems"] if p["check"] == "data"}
    assert named[".tunelab/data/CURRENT"]["problem"] == "holds '../runs/r001-majority', no version"
    assert named[".tunelab/data/CURRENT"]["fix"].startswith("run `tunelab data` again")
    code, refused = tl(capsys, "inspect", *where)
    assert code == 2 and "not a data version id: it was edited" in refused["error"]


def test_an_edited_record_is_not_written_again_over_the_edit(make_lab, capsys):
    """`invalidate` and `resume` rewrote a record edited by hand and logged its new sha256:
    fsck then read clean, and a faked macro F1 of 99.0 stood vouched for."""
    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"], ["run", "--name", "lora"]):
        assert tl(capsys, *command, *where)[0] == 0
    (path,) = (lab / ".tunelab" / "runs").glob("*-lora/record.json")
    record = json.loads(path.read_text())
    record["metrics"]["macro_f1"] = 0.99
    path.write_text(json.dumps(record))
    run = path.parent.name
    for command in (["invalidate", run, "--why", "tidying up"], ["resume", run]):
        code, refused = tl(capsys, *command, *where)
        assert code == 2, command
        assert f"{path}: changed after line" in refused["error"]
        assert "fsck --repair" in refused["error"]
    assert json.loads(path.read_text()) == record  # as the edit left it, still not vouched for
    code, found = tl(capsys, "fsck", *where)
    assert code == 1 and [p["path"] for p in found["problems"]] == [str(path.relative_to(lab))]


def test_a_split_edited_with_its_manifest_is_caught_by_the_log(make_lab, capsys):
    """The test split and its hashes in the manifest changed together: fsck read clean and
    `final` called the changed split "verified"; a manifest wiped to {} read "0 data files,
    clean" and turned every split's check off."""
    import hashlib

    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"]):
        assert tl(capsys, *command, *where)[0] == 0
    (folder,) = (lab / ".tunelab" / "data").glob("*/")
    manifest_path = folder / "manifest.json"
    pristine = manifest_path.read_text()
    test = folder / "test.jsonl"
    rows = test.read_text().splitlines()
    row = json.loads(rows[0])
    row["label"] = "business" if row["label"] != "business" else "sport"
    test.write_text("\n".join([json.dumps(row), *rows[1:]]) + "\n")
    digest = hashlib.sha256(test.read_bytes()).hexdigest()
    manifest = json.loads(pristine)
    manifest["files"]["test.jsonl"] = manifest["split_sha256"]["test"] = digest
    manifest["test_sha256"] = digest
    manifest_path.write_text(json.dumps(manifest))
    code, found = tl(capsys, "fsck", *where)
    shown = str(manifest_path.relative_to(lab))
    assert code == 1 and [p["path"] for p in found["problems"]] == [shown]
    code, refused = tl(capsys, "final", "r001-majority", "--reason", "a look", *where)
    assert code == 2 and shown in refused["error"]
    manifest_path.write_text("{}")
    code, refused = tl(capsys, "run", "--name", "lora", *where)
    assert code == 2 and f"{manifest_path}: changed after line" in refused["error"], refused
    code, found = tl(capsys, "fsck", *where)
    assert code == 1 and shown in [p["path"] for p in found["problems"]]


def test_json_of_the_wrong_shape_is_named_not_crashed_on(make_lab, capsys):
    """A log line `[1,2]`, a record `[]` or `{}`, a manifest `[]`: fsck crashed or read clean,
    and runs, resume and invalidate stopped with internal errors."""
    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"]):
        assert tl(capsys, *command, *where)[0] == 0
    store = lab / ".tunelab"
    log = store / "events.jsonl"
    pristine = log.read_text()
    log.write_text(pristine + "[1, 2]\n")
    code, found = tl(capsys, "fsck", *where)
    assert code == 1 and any("not a JSON event" in p["problem"] for p in found["problems"])
    code, refused = tl(capsys, "compare", *where)
    assert code == 2 and not refused["internal"]
    log.write_text(pristine)

    record = store / "runs" / "r001-majority" / "record.json"
    kept = record.read_text()
    for shape in ("[]", "{}"):
        record.write_text(shape)
        for command in (["runs"], ["invalidate", "r001-majority", "--why", "x"], ["report"]):
            code, out = tl(capsys, *command, *where)
            named = str(record.relative_to(lab)) in out["error"]
            assert code == 2 and not out["internal"] and named, (command, out)
        code, found = tl(capsys, "fsck", *where)
        assert code == 1 and str(record.relative_to(lab)) in [p["path"] for p in found["problems"]]
    record.write_text(kept)

    (manifest,) = store.glob("data/*/manifest.json")
    manifest.write_text("[]")
    code, found = tl(capsys, "fsck", *where)
    assert code == 1 and any("not the object" in p["problem"] for p in found["problems"])
    code, refused = tl(capsys, "run", "--name", "q", *where)
    assert code == 2 and not refused["internal"]


def test_a_deleted_run_keeps_its_number(make_lab, capsys):
    """`Store.reserve` took one past the highest folder: with r003-lora deleted, the next run
    was r003-again, while the log and comparison c001 still named r003-lora as r003."""
    import shutil

    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"], ["run", "--name", "lora"]):
        assert tl(capsys, *command, *where)[0] == 0
    shutil.rmtree(lab / ".tunelab" / "runs" / "r003-lora")
    code, again = tl(capsys, "run", "--name", "again", *where)
    assert code == 0 and again["id"] == "r004-again"


def test_a_bundle_whose_export_was_not_recorded_is_named(make_lab, capsys, monkeypatch):
    """A kill between the bundle's rename into place and its record left a whole, verifiable
    bundle the lab never recorded: fsck read clean and a new export said only "exists"."""
    from tunelab.stages.export import bundle as export_bundle

    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"], ["run", "--name", "lora"], ["compare"]):
        assert tl(capsys, *command, *where)[0] == 0

    def killed(*_):
        raise SystemExit(137)  # as a kill -9 stops it: nothing after the rename runs

    monkeypatch.setattr(export_bundle, "_record", killed)
    with pytest.raises(SystemExit):
        main(["export", "r003-lora", *where, "--json"])
    capsys.readouterr()
    monkeypatch.undo()
    bundle = lab / "bundles" / "r003-lora"
    assert (bundle / "SHA256SUMS").is_file()
    code, found = tl(capsys, "fsck", *where)
    assert code == 1
    assert [p["path"] for p in found["problems"]] == ["bundles/r003-lora"]
    assert "no export record names" in found["problems"][0]["problem"]
    code, refused = tl(capsys, "export", "r003-lora", *where)
    assert code == 2 and "an export stopped after writing it" in refused["error"]
    import shutil

    shutil.rmtree(bundle)  # the advice; then a lab moved keeps its recorded bundle recorded
    assert tl(capsys, "export", "r003-lora", *where)[0] == 0
    moved = Path(shutil.copytree(lab, lab.parent / "moved"))
    code, clean = tl(capsys, "fsck", "--lab", str(moved))
    assert code == 0, clean["problems"]


def test_a_missing_format_file_is_named_not_made_up(make_lab, capsys):
    """With format.json deleted, fsck read clean and the next command wrote it again as a lab
    "upgraded from format 1" at a line of its choosing: a made-up history."""
    lab = make_lab()
    where = ["--lab", str(lab)]
    assert tl(capsys, "data", *where)[0] == 0
    path = lab / ".tunelab" / "format.json"
    path.unlink()
    code, found = tl(capsys, "fsck", *where)
    assert code == 1 and [p["path"] for p in found["problems"]] == [".tunelab/format.json"]
    code, refused = tl(capsys, "baseline", *where)
    assert code == 2 and "format.json is missing" in refused["error"] and not path.exists()


def test_a_lab_no_data_step_has_completed_in_is_told_what_to_run(make_lab, capsys):
    """A `data` killed before its version was whole left a tunelab.yaml and no store, which
    fsck called "not a tunelab lab"."""
    lab = make_lab()
    code, err = tl(capsys, "fsck", "--lab", str(lab))
    assert code == 2 and "has a tunelab.yaml and no store yet" in err["error"]
    assert "run `tunelab data`" in err["error"]
