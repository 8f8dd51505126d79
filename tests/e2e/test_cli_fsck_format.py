"""The store's format record speaks for its past: in a lab begun in format 2, a record dropped
in without `store_format` is no format-1 record, and a log stripped of every link is no log from
before the chain. Both had read `clean` (hS F1, F5)."""

from __future__ import annotations

import json
import shutil

from conftest import tl


def test_a_forged_record_and_a_log_stripped_of_its_links_are_named(make_lab, capsys):
    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"], ["run", "--name", "lora"], ["compare"]):
        assert tl(capsys, *command, *where)[0] == 0
    runs = lab / ".tunelab" / "runs"
    shutil.copytree(runs / "r003-lora", runs / "r004-forged")
    forged = json.loads((runs / "r003-lora" / "record.json").read_text())
    forged |= {"id": "r004-forged", "metrics": forged["metrics"] | {"macro_f1": 0.99}}
    del forged["store_format"]  # as a format-1 record would be
    (runs / "r004-forged" / "record.json").write_text(json.dumps(forged))
    code, found = tl(capsys, "fsck", *where)
    named = [p["path"] for p in found["problems"] if p["check"] == "records"]
    assert code == 1 and named == [".tunelab/runs/r004-forged/record.json"], found["problems"]
    code, refused = tl(capsys, "compare", *where)
    assert code == 2 and "r004-forged/record.json in no event of the log" in refused["error"]
    shutil.rmtree(runs / "r004-forged")
    assert tl(capsys, "fsck", *where)[0] == 0

    log = lab / ".tunelab" / "events.jsonl"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    stripped = [json.dumps({k: v for k, v in e.items() if k != "prev"}) for e in lines]
    del stripped[2]  # and a line deleted
    log.write_text("\n".join(stripped) + "\n")
    code, found = tl(capsys, "fsck", *where)
    broken = [p for p in found["problems"] if "has no link to the line before it" in p["problem"]]
    assert code == 1 and len(broken) == len(stripped), found["problems"]
    code, refused = tl(capsys, "compare", *where)
    assert code == 2 and "(lines 1, 2, 3, 4, 5 and " in refused["error"]  # one problem, once
    assert refused["error"].count("has no link to the line before it") == 1


def test_a_run_whose_files_were_lost_is_let_go_by_invalidating_it(make_lab, capsys):
    """fsck's advice for lost weights, `tunelab invalidate` the run, had left fsck failing for
    good: it then checked the invalid run's weights as a stopped run's (hS F2)."""
    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"], ["run", "--name", "lora"], ["compare"]):
        assert tl(capsys, *command, *where)[0] == 0
    run = lab / ".tunelab" / "runs" / "r003-lora"
    shutil.rmtree(run / "weights")
    (run / "predictions.jsonl").unlink()  # which comparison c001 judged
    code, found = tl(capsys, "fsck", *where)
    assert code == 1 and all("invalidate" in p["fix"] for p in found["problems"]), found
    assert tl(capsys, "invalidate", "r003-lora", "--why", "its disk died", *where)[0] == 0
    code, clean = tl(capsys, "fsck", *where)
    assert code == 0 and clean["problems"] == []


def test_a_run_does_not_build_on_an_edited_baseline(make_lab, capsys):
    """`compare`, `final` and `export` refused the lab, while `run` trained on from the edited
    probe's record without a word (hS F8)."""
    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"]):
        assert tl(capsys, *command, *where)[0] == 0
    probe = lab / ".tunelab" / "runs" / "r002-probe" / "record.json"
    edited = json.loads(probe.read_text())
    edited["metrics"]["macro_f1"] = 0.5
    probe.write_text(json.dumps(edited))
    code, refused = tl(capsys, "run", *where, "--name", "lora")
    assert code == 2 and f"{probe}: changed after line" in refused["error"], refused
    assert "`tunelab run` does not build on it" in refused["error"]


def test_a_format_1_lab_s_records_are_listed_as_not_checked(make_lab, capsys):
    """README says fsck lists a format-1 lab's records as not checked; it said only `clean`
    (hS F7)."""
    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"]):
        assert tl(capsys, *command, *where)[0] == 0
    store = lab / ".tunelab"  # as a tunelab before store format 2 left it
    log = store / "events.jsonl"
    old = [json.loads(line) for line in log.read_text().splitlines()]
    drop = ("prev", "record_sha256")
    log.write_text(
        "".join(json.dumps({k: v for k, v in e.items() if k not in drop}) + "\n" for e in old)
    )
    for path in (store / "runs").glob("*/record.json"):
        path.write_text(
            json.dumps(
                {k: v for k, v in json.loads(path.read_text()).items() if k != "store_format"}
            )
        )
    (store / "format.json").unlink()
    code, found = tl(capsys, "fsck", *where)
    assert code == 0 and found["problems"] == [], found["problems"]
    (said,) = [n for n in found["not_checked"] if "before store format 2" in n]
    assert said.startswith("2 record(s) written before store format 2, which the log holds no")
