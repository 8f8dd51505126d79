"""fsck's check of what comparisons stand on: each run's predictions as they hashed them."""

import json

from tunelab.core.digest import sha256_file
from tunelab.core.store import Store
from tunelab.stages.fsck.folders import comparison_inputs


def judged(store: Store, cid: str, runs: list[str]) -> None:
    inputs = [
        {"run": r, "predictions_sha256": sha256_file(store.runs_dir / r / "predictions.jsonl")}
        for r in runs
    ]
    folder = store.root / "comparisons"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{cid}.json").write_text(json.dumps({"id": cid, "inputs": inputs}))


def test_a_run_folder_deleted_is_named_once_with_what_can_mend_it(tmp_path):
    """A deleted run folder read 'missing; restore the run's predictions, or invalidate the
    run' once per comparison that judged it (9 lines for one run): invalidate refuses a run
    whose record is gone."""
    store = Store(tmp_path)
    for run in ("r001-a", "r002-b"):
        (store.runs_dir / run).mkdir(parents=True)
        (store.runs_dir / run / "predictions.jsonl").write_text(f'{{"id": "{run}"}}\n')
        (store.runs_dir / run / "record.json").write_text("{}")
    for cid in ("c001", "c002", "c010"):
        judged(store, cid, ["r001-a", "r002-b"])
    for name in ("predictions.jsonl", "record.json"):
        (store.runs_dir / "r001-a" / name).unlink()  # the folder's files gone
    (store.runs_dir / "r002-b" / "predictions.jsonl").unlink()  # its predictions alone
    problems, n = comparison_inputs(store, [])
    assert n == 6 and len(problems) == 2
    gone, lost = sorted(problems, key=lambda p: p["path"])
    assert gone["problem"] == "missing (judged by comparisons c001, c002, c010)"
    assert gone["fix"] == "restore the run's folder from a backup"
    assert lost["fix"] == "restore the run's predictions, or invalidate the run"


def test_a_final_that_kept_no_test_predictions_is_said_not_checked(tmp_path):
    """fsck counted only the finals it could check and said nothing of the others (a final an
    older tunelab wrote keeps no per-example test predictions)."""
    from tunelab.stages.fsck.folders import final_predictions

    store = Store(tmp_path)
    finals = store.root / "finals"
    finals.mkdir(parents=True)
    (finals / "1-r003-lora.json").write_text(json.dumps({"n": 1, "run": "r003-lora"}))
    (finals / "2-r004-x.json").write_text("{not json")  # unreadable: named elsewhere, once
    not_checked: list[str] = []
    problems, n = final_predictions(store, not_checked)
    assert (problems, n) == ([], 0)
    assert not_checked == [
        ".tunelab/finals/1-r003-lora.json: its test predictions (the final was written by a "
        "tunelab that did not keep them)"
    ]


def test_an_interrupted_run_whose_kept_checkpoint_is_gone_is_named(tmp_path):
    """A lab cloned from git without its checkpoints: fsck named nothing, and `resume` said the
    run "stopped before its first checkpoint"."""
    from tunelab.stages.fsck.folders import run_folders

    store = Store(tmp_path)
    record = {"id": "r005-long", "status": "interrupted", "checkpoint": "checkpoint"}
    (store.runs_dir / "r005-long").mkdir(parents=True)
    (store.runs_dir / "r005-long" / "record.json").write_text(json.dumps(record))
    (problem,), n = run_folders(store, [])
    assert n == 1 and problem["path"] == ".tunelab/runs/r005-long/checkpoint"
    assert problem["problem"].startswith("missing: the run's record says it kept its checkpoint")
    record["checkpoint"] = None  # stopped before its first: nothing to name
    (store.runs_dir / "r005-long" / "record.json").write_text(json.dumps(record))
    assert run_folders(store, []) == ([], 1)
