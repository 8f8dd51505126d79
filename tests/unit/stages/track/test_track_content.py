"""What a lab puts into MLflow, read from the store alone (no MLflow here): the spec as params,
the loss history and metrics as points, the tags, the artifacts; and where the store is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tracked_lab import build_lab, finished, lab  # noqa: F401 (pytest finds the fixtures here)

from tunelab.core.digest import sha256_file
from tunelab.core.store import Store
from tunelab.stages.track.content import (
    history,
    lab_content,
    lab_identity,
    run_content,
    stale_report,
)
from tunelab.stages.track.names import flatten, name, scalars
from tunelab.stages.track.uri import resolve


def test_the_spec_flattens_to_dotted_params_as_the_spec_writes_values():
    spec = {
        "training": {"lr": 0.001, "budget": {"steps": 4, "tokens": None}, "compile": False},
        "method": {"target_modules": ["query", "value"]},
        "guardrails": [{"metric": "f1", "max_drop": 0.05}],
        "compass": {"why": ""},
        "empty": {},
    }
    assert flatten(spec) == {
        "training.lr": "0.001",
        "training.budget.steps": "4",
        "training.budget.tokens": "null",
        "training.compile": "false",
        "method.target_modules": '["query", "value"]',
        "guardrails": '[{"metric": "f1", "max_drop": 0.05}]',
        "compass.why": "",
        "empty": "{}",
    }
    assert len(flatten({"long": "x" * 7000})["long"]) == 6000  # MLflow's limit for a param


def test_metrics_keep_their_numbers_under_names_mlflow_accepts():
    found = scalars(
        {
            "accuracy": 0.5,
            "per_class": {"food & drink": {"f1": 0.25, "support": 3}},
            "confusion": {"labels": ["a"], "matrix": [[1]]},
            "exact": True,
            "note": "text",
        }
    )
    assert found == {
        "accuracy": 0.5,
        "per_class/food _ drink/f1": 0.25,  # fitted, alone: the key it always had
        "per_class/food _ drink/support": 3.0,
    }
    assert name("ünïcode ok/a.b-c:d_e") == "ünïcode ok/a.b-c:d_e"


def test_labels_fitted_alike_keep_a_metric_each():
    """`R&D` and `R+D` were both `R_D`: the second overwrote the first in silence, and a label
    with a `/` made two levels of the key."""
    found = scalars(
        {"per_class": {k: {"f1": v} for k, v in (("R&D", 0.1), ("R+D", 0.2), ("a/b", 0.3))}}
    )
    assert len(found) == 3 and sorted(found.values()) == [0.1, 0.2, 0.3]
    assert all(key.count("/") == 2 for key in found)
    assert scalars({"per_class": {"sport": {"f1": 0.5}}}) == {"per_class/sport/f1": 0.5}


def test_the_history_is_the_records_once_ended_else_the_file_as_far_as_it_was_written(lab):
    runs = {r["name"]: r for r in lab.runs()}
    lora, live = runs["lora"], runs["live"]
    assert [e["step"] for e in history(lab.runs_dir / lora["id"], lora)] == [1, 2, 3, 4]
    live_dir = lab.runs_dir / live["id"]
    assert [e["step"] for e in history(live_dir, live)] == [1, 2]  # the torn third line left
    with (live_dir / "history.jsonl").open("w") as f:  # a resumed run wrote step 2 again
        f.write('{"step": 1, "loss": 3}\n{"step": 2, "loss": 2}\n{"step": 2, "loss": 1.5}\n')
    assert [e["loss"] for e in history(live_dir, live)] == [3, 1.5]


def test_a_judged_run_carries_its_state_parent_data_and_verdict(lab):
    runs = {r["name"]: r for r in lab.runs()}
    wanted = run_content(lab, runs["lora"])
    assert wanted.name == runs["lora"]["id"] and wanted.status == "FINISHED"
    assert wanted.tags | {"tunelab.verdict_interval": "-"} == {
        "tunelab.run_id": runs["lora"]["id"],
        "tunelab.state": "completed",
        "tunelab.data_version": "v1",
        "tunelab.kind": "variant",
        "tunelab.method": "lora",
        "tunelab.task": "classification",
        "tunelab.parent": runs["probe"]["id"],
        "tunelab.verdict": "improved",
        "tunelab.comparison": "c001",
        "tunelab.verdict_against": runs["probe"]["id"],
        "tunelab.verdict_interval": "-",
    }
    interval = "accuracy +0.2000 (+0.1000, +0.3000), examples"
    assert wanted.tags["tunelab.verdict_interval"] == interval
    points = {(p.key, p.step): p.value for p in wanted.points}
    assert points[("train/loss", 4)] == 0.3 and points[("validation/accuracy", 4)] == 0.9
    assert points[("validation/per_class/food _ drink/support", 4)] == 10.0
    assert not any(key.startswith("validation/confusion") for key, _ in points)
    start = wanted.start or 0  # each step at its `seconds` after the run's start
    steps = {p.timestamp - start for p in wanted.points if p.key == "train/loss"}
    assert start > 0 and steps == {1000, 2000, 3000, 4000}
    assert list(wanted.artifacts) == ["record.json"]
    assert run_content(lab, runs["live"]).status == "RUNNING"
    assert run_content(lab, runs["live"]).end is None
    assert "tunelab.verdict" not in run_content(lab, runs["majority"]).tags


def test_the_lab_run_holds_the_report_and_the_comparisons_or_is_not_made(lab, tmp_path):
    wanted = lab_content(lab)
    assert wanted is not None
    assert sorted(wanted.artifacts) == ["comparisons/c001.json", "lab-report.html"]
    assert wanted.tags["tunelab.comparisons"] == "c001"
    bare = tmp_path / "bare"
    (bare / ".tunelab").mkdir(parents=True)
    assert lab_content(Store(bare)) is None
    assert lab_identity(Store(bare)) is None
    assert len(lab_identity(lab) or "") == 16


def test_a_report_page_older_than_the_lab_or_not_logged_is_said(lab):
    page = lab.lab / "lab-report.html"
    assert "not a page `tunelab report` logged" in stale_report(lab)  # written by hand
    lab.log_event("report", file="lab-report.html", sha256=sha256_file(page))
    assert stale_report(lab) is None
    lab.log_event("report", file="elsewhere.html", sha256="0" * 64)  # another page: no change
    assert stale_report(lab) is None
    lab.log_event("run_started", run="r009-late")
    assert "written before 1 later event (the last: run_started r009-late at" in stale_report(lab)
    page.unlink()
    assert stale_report(lab) is None


def test_the_store_is_the_labs_sqlite_unless_told(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    lab = tmp_path / "lab"
    default = resolve(lab, None)
    assert default.uri == f"sqlite:///{lab}/mlflow.db" and default.kind == "sqlite"
    assert default.artifacts == (lab / "mlartifacts").as_uri()
    assert default.given == "the default"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking:5000")
    env = resolve(lab, None)
    assert (env.uri, env.kind) == ("http://tracking:5000", "remote")
    assert env.given == "MLFLOW_TRACKING_URI"
    monkeypatch.chdir(tmp_path)
    db = resolve(lab, "runs.db")
    assert db.uri == f"sqlite:///{tmp_path}/runs.db" and db.given == "--mlflow"
    folder = resolve(lab, "mlruns")
    assert (folder.uri, folder.kind) == ((tmp_path / "mlruns").as_uri(), "file")
    given = resolve(lab, "sqlite:////x/y.db")
    assert (given.kind, given.artifacts) == ("sqlite", Path("/x/mlartifacts").as_uri())
    assert resolve(lab, "postgresql://u@h/db").kind == "database"
    assert resolve(lab, "databricks").kind == "remote"  # MLflow's word for Databricks
    assert resolve(lab, "databricks-work").kind == "file"  # any other word names a folder


def test_the_cli_imports_no_mlflow_until_track_runs():
    code = "import sys, tunelab.cli; print('mlflow' in sys.modules)"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "False"


def test_a_forgetting_sets_scores_are_tracked_beside_the_validation_metrics(tmp_path):
    store = Store(tmp_path)
    run_dir = store.runs_dir / "r002-lora"
    run_dir.mkdir(parents=True)
    record = {
        "id": "r002-lora",
        "kind": "variant",
        "status": "completed",
        "data_version": "v1",
        "created": "2026-12-06T12:00:00+00:00",
        "ended": "2026-12-06T12:05:00+00:00",
        "metrics": {"exact_match": 0.867, "n": 60},
        "guard": {
            "general/bbc_news.jsonl": {"metrics": {"bits_per_byte": 1.16, "n": 25}},
        },
    }
    (run_dir / "record.json").write_text(json.dumps(record))
    points = {p.key: p.value for p in run_content(store, record).points}
    assert points["validation/exact_match"] == 0.867
    assert points["guard/general/bbc_news.jsonl/bits_per_byte"] == 1.16


def test_a_run_s_final_brings_its_test_metrics_and_which_look_it_was(lab):
    """After `tunelab final`, MLflow held no test score: the team that looks there saw
    validation alone. The run's last final gives `test/...` points, `tunelab.final` (a repeated
    look said so) and the final's record; before any final, nothing of the test split."""
    from tunelab.core.layout import FINALS
    from tunelab.core.store import atomic_write_json

    runs = {r["name"]: r for r in lab.runs()}
    lora = runs["lora"]
    before = run_content(lab, lora, finals=lab.records(FINALS))
    assert not [p for p in before.points if p.key.startswith("test/")]
    assert "tunelab.final" not in before.tags
    for n, repeated in ((1, False), (2, True)):
        file = f".tunelab/{FINALS}/{n}-{lora['id']}.json"
        final = {"n": n, "run": lora["id"], "reason": "ship it", "repeated": repeated}
        final |= {"file": file, "metrics": {"accuracy": 0.7 + n / 100, "n": 30}}
        atomic_write_json(lab.lab / file, final)
    wanted = run_content(lab, lora, finals=lab.records(FINALS))
    points = {p.key: p.value for p in wanted.points if p.key.startswith("test/")}
    assert points == {"test/accuracy": 0.72, "test/n": 30.0}  # the last look's
    assert (
        wanted.tags["tunelab.final"] == "2"
        and "opened before" in (wanted.tags["tunelab.final_repeated"])
    )
    assert f"{FINALS}/2-{lora['id']}.json" in wanted.artifacts
    other = run_content(lab, runs["probe"], finals=lab.records(FINALS))
    assert not [p for p in other.points if p.key.startswith("test/")]
