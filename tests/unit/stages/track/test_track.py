"""`tunelab track` into real MLflow stores (the lab's SQLite by default, a folder), everything
read back with MLflow's own client: runs, params, metric history by step, tags, artifacts and
status; a second track adds nothing; a run that finished since gets only what it lacks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient
from tracked_lab import build_lab, finished, lab  # noqa: F401 (pytest finds the fixtures here)

from tunelab.cli import main
from tunelab.core.store import Store
from tunelab.stages.track.names import flatten
from tunelab.stages.track.track import track_lab
from tunelab.stages.track.uri import TrackError


def read_back(uri: str, experiment: str) -> dict:
    """Everything MLflow holds for the experiment, keyed by run name."""
    mlflow = MlflowClient(tracking_uri=uri)
    found = mlflow.get_experiment_by_name(experiment)
    assert found is not None
    out = {}
    for run in mlflow.search_runs([found.experiment_id], run_view_type=ViewType.ALL):
        run_id = run.info.run_id
        history = {
            key: [(m.step, m.value) for m in mlflow.get_metric_history(run_id, key)]
            for key in run.data.metrics
        }
        out[run.info.run_name] = {
            "info": run.info,
            "params": run.data.params,
            "tags": {k: v for k, v in run.data.tags.items() if k.startswith("tunelab.")},
            "history": history,
            "artifacts": _files(mlflow, run_id),
        }
    return out


def _files(mlflow: MlflowClient, run_id: str, path: str | None = None) -> list[str]:
    files = []
    for info in mlflow.list_artifacts(run_id, path):
        files += _files(mlflow, run_id, info.path) if info.is_dir else [info.path]
    return sorted(files)


def test_every_run_metric_tag_and_artifact_reads_back_and_a_second_track_adds_nothing(
    lab: Store, monkeypatch
):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    first = track_lab(lab.lab)
    assert first["uri"] == f"sqlite:///{lab.lab}/mlflow.db" and first["experiment"]["new"]
    assert first["counts"] == {"new": 4, "updated": 0, "unchanged": 0, "skipped": 0, "doubted": 0}
    held = read_back(first["uri"], "tickets")
    records = {r["id"]: r for r in lab.runs()}
    assert set(held) == {*records, "lab"}
    for run_id, record in records.items():
        run = held[run_id]
        assert run["params"] == flatten(record["spec"])
        assert run["params"]["training.lr"] == "0.001"
        assert run["tags"]["tunelab.run_id"] == run_id
        assert run["tags"]["tunelab.state"] == record["status"]
        assert run["tags"]["tunelab.data_version"] == "v1"
        assert run["tags"].get("tunelab.parent") == record.get("parent")
        assert run["artifacts"] == ["record.json"]
        mlflow = MlflowClient(tracking_uri=first["uri"])
        copy = mlflow.download_artifacts(run["info"].run_id, "record.json", str(lab.lab / "dl"))
        assert json.loads(Path(copy).read_text()) == record
    by_name = {r["name"]: r["id"] for r in records.values()}
    lora, live = held[by_name["lora"]], held[by_name["live"]]
    assert lora["history"]["train/loss"] == [(s, 1.2 / s) for s in (1, 2, 3, 4)]
    assert lora["history"]["train/tokens"] == [(s, 64.0 * s) for s in (1, 2, 3, 4)]
    assert lora["history"]["validation/accuracy"] == [(4, 0.9)]
    assert lora["history"]["validation/per_class/food _ drink/f1"] == [(4, 0.9)]
    assert lora["tags"]["tunelab.verdict"] == "improved"
    assert lora["tags"]["tunelab.comparison"] == "c001"
    assert lora["info"].status == "FINISHED"
    assert held[by_name["majority"]]["history"]["validation/accuracy"] == [(0, 0.5)]
    assert "tunelab.verdict" not in held[by_name["majority"]]["tags"]
    assert live["info"].status == "RUNNING" and live["tags"]["tunelab.state"] == "running"
    assert live["history"]["train/loss"] == [(1, 1.2), (2, 0.6)]  # as far as it was written
    assert held["lab"]["artifacts"] == ["comparisons/c001.json", "lab-report.html"]
    assert (lab.lab / "mlartifacts").is_dir()  # beside the database, not where pytest runs

    again = track_lab(lab.lab)
    assert again["counts"] == {"new": 0, "updated": 0, "unchanged": 4, "skipped": 0, "doubted": 0}
    assert again["added"] == {"params": 0, "metrics": 0, "tags": 0, "artifacts": 0}
    assert not again["lab_run"]["changed"]
    assert _plain(read_back(first["uri"], "tickets")) == _plain(held)


def _plain(held: dict) -> dict:
    return {name: {k: v for k, v in run.items() if k != "info"} for name, run in held.items()}


def test_a_record_the_log_does_not_vouch_for_is_not_tracked(lab: Store, tmp_path, capsys):
    """A hand-typed score had gone into MLflow as measured, where MLflow only adds points:
    `runs` marked it, `compare` refused it, `track` published it (hS F3)."""
    lora = next(r for r in lab.runs() if r["name"] == "lora")
    path = lab.run_dir(lora["id"]) / "record.json"
    path.write_text(json.dumps(lora | {"metrics": lora["metrics"] | {"accuracy": 0.99}}))
    uri = str(tmp_path / "mlruns")
    assert main(["track", "--lab", str(lab.lab), "--mlflow", uri, "--experiment", "desk"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert f"{lora['id']} " in shown and "not tracked: its record is edited after the log" in shown
    assert "3 new, 0 updated, 0 unchanged, 1 not tracked (records the lab's log does not" in shown
    assert lora["id"] not in read_back(uri, "desk")


def test_a_run_that_finished_since_gets_only_what_it_lacks(lab: Store, finished, tmp_path):
    uri = str(tmp_path / "mlruns")  # a folder: MLflow's file store
    first = track_lab(lab.lab, uri, "desk")
    assert first["store"] == "file" and first["counts"]["new"] == 4
    live = next(r["id"] for r in lab.runs() if r["name"] == "live")
    finished(lab, live)
    (lab.lab / "lab-report.html").write_text("<html><body>the lab, later</body></html>\n")

    second = track_lab(lab.lab, uri, "desk")
    assert second["counts"] == {"new": 0, "updated": 1, "unchanged": 3, "skipped": 0, "doubted": 0}
    row = next(r for r in second["runs"] if r["id"] == live)
    assert row["params"] == 0 and row["artifacts"] == ["record.json"]
    assert row["metrics"] == 2 * 5 + 11  # steps 3, 4 of five series; 11 validation numbers
    assert row["status"] == "FINISHED" and row["state"] == "completed"
    assert second["lab_run"]["artifacts"] == ["lab-report.html"]
    held = read_back(first["uri"], "desk")[live]
    assert held["history"]["train/loss"] == [(s, 1.2 / s) for s in (1, 2, 3, 4)]
    assert held["history"]["validation/accuracy"] == [(4, 0.9)]
    assert held["tags"]["tunelab.state"] == "completed" and held["info"].status == "FINISHED"
    assert held["info"].end_time is not None

    third = track_lab(lab.lab, uri, "desk")
    assert third["counts"]["unchanged"] == 4 and not any(third["added"].values())


def test_a_track_stopped_after_a_run_was_created_is_finished_by_the_next(
    lab: Store, tmp_path, monkeypatch
):
    """The run's identity came last, after its params, metrics and artifacts: a track stopped
    before it left an untagged run RUNNING, and the next track added a second one."""
    uri = str(tmp_path / "mlruns")
    real = MlflowClient.log_batch

    def stopped(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(MlflowClient, "log_batch", stopped)
    with pytest.raises(KeyboardInterrupt):
        track_lab(lab.lab, uri, "desk")
    monkeypatch.setattr(MlflowClient, "log_batch", real)
    again = track_lab(lab.lab, uri, "desk")
    assert again["counts"]["new"] == 3 and again["counts"]["updated"] == 1  # the cut one found
    held = read_back(again["uri"], "desk")
    assert len(held) == 5  # four runs and the lab's, as one uninterrupted track makes
    assert all(held[name]["tags"].get("tunelab.state") for name in held if name != "lab")


def test_a_run_deleted_in_mlflow_stays_deleted(lab: Store, tmp_path):
    uri = str(tmp_path / "mlruns")
    first = track_lab(lab.lab, uri, "desk")
    gone = first["runs"][0]
    MlflowClient(tracking_uri=first["uri"]).delete_run(gone["mlflow_run"])
    again = track_lab(lab.lab, uri, "desk")
    assert again["counts"] == {"new": 0, "updated": 0, "unchanged": 3, "skipped": 1, "doubted": 0}
    assert "deleted in MLflow" in again["runs"][0]["skipped"]
    assert len(read_back(first["uri"], "desk")) == 5  # no second run for it


def test_an_experiment_holds_one_lab_wherever_the_lab_moves(lab: Store, build_lab, tmp_path):
    uri = str(tmp_path / "mlruns")
    track_lab(lab.lab, uri, "desk")
    other = build_lab(tmp_path / "other", first="zero")
    with pytest.raises(TrackError, match=r"holds another lab's runs.*--experiment NAME"):
        track_lab(other.lab, uri, "desk")
    moved = lab.lab.rename(tmp_path / "moved")
    again = track_lab(moved, uri, "desk")  # the same lab: its first event is its identity
    assert again["counts"]["unchanged"] == 4


def test_a_copy_that_went_its_own_way_is_refused_and_the_original_goes_on(lab: Store, tmp_path):
    """A copy and its original, tracked in turn into one experiment, rolled each other's run
    states back and put their newer runs side by side under one id."""
    import shutil

    uri = str(tmp_path / "mlruns")
    track_lab(lab.lab, uri, "desk")
    copy = Store(shutil.copytree(lab.lab, tmp_path / "copy"))
    copy.log_event("note", said="the copy's own step")
    lab.log_event("note", said="the original's own step")
    assert track_lab(lab.lab, uri, "desk")["counts"]["new"] == 0  # the original: gone on only
    with pytest.raises(TrackError) as err:  # the copy lacks the line the original reached
        track_lab(copy.lab, uri, "desk")
    said = str(err.value)
    assert "holds this lab's runs, but it was last tracked from a lab whose log line" in said
    assert said.endswith("track this lab with --experiment NAME")
    assert track_lab(copy.lab, uri, "copy")["experiment"]["new"]  # the copy: its own


def test_user_errors_exit_2_naming_the_fix(lab: Store, tmp_path, monkeypatch, capsys):
    def error(folder: Path, *args: str) -> str:
        assert main(["track", "--lab", str(folder), *args, "--json"]) == 2
        return json.loads(capsys.readouterr().out)["error"]

    bad = error(lab.lab, "--mlflow", "nosuch://x")
    assert "MLflow cannot use the tracking URI 'nosuch://x' (from --mlflow)" in bad
    assert "not a lab (no .tunelab/ store)" in error(tmp_path / "nowhere")
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)  # as if it were not installed
    missing = error(lab.lab, "--mlflow", str(tmp_path / "mlruns"))
    assert "pip install 'tunelab[mlflow]'" in missing
    assert not (tmp_path / "mlruns").exists() and not (lab.lab / "mlflow.db").exists()


def test_a_store_this_user_may_not_write_is_refused_before_mlflow_opens_it(
    lab: Store, tmp_path, monkeypatch, capsys
):
    """A read-only lab: MLflow's 76-line traceback and an internal error for its database, or
    100 s of retries where it could not create one."""
    import os

    real = os.access
    read_only = {lab.lab.resolve(), lab.lab.resolve() / "mlflow.db"}
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) not in read_only and real(p, mode))
    assert main(["track", "--lab", str(lab.lab), "--json"]) == 2
    said = json.loads(capsys.readouterr().out)["error"]
    assert said.startswith(f"{lab.lab.resolve()}: this user may not write there")
    assert "give --mlflow a store elsewhere" in said
    assert not (lab.lab / "mlflow.db").exists()
    elsewhere = str(tmp_path / "elsewhere.db")
    assert main(["track", "--lab", str(lab.lab), "--mlflow", elsewhere, "--json"]) == 0


def test_the_comparisons_are_read_once_however_many_runs(lab: Store, tmp_path, monkeypatch):
    """Each run's verdict is looked up in the lab's comparisons: read once for the whole track
    (read per run, a no-op track of 126 runs took 27 s, 20 of them decoding the same JSON)."""
    reads = []
    real = Store.comparisons
    monkeypatch.setattr(Store, "comparisons", lambda self: reads.append(1) or real(self))
    done = track_lab(lab.lab, str(tmp_path / "m.db"))
    assert len(done["runs"]) == 4 and len(reads) == 1
    names = {r["id"]: r["name"] for r in lab.runs()}
    verdicts = {names[r["id"]]: r["verdict"] for r in done["runs"]}
    assert verdicts["lora"] == "improved" and verdicts["majority"] is None


def test_a_second_track_of_the_lab_waits_for_the_first(lab: Store, tmp_path, monkeypatch):
    """Two tracks at once each found a run missing and created it, and on a new store one
    lost everything it wrote; the second now waits for the lab's track lock."""
    import threading

    from tunelab.core.files import locked
    from tunelab.core.layout import TRACK_LOCK
    from tunelab.stages.track import track as module

    opened = threading.Event()
    real = module.client

    def client(target):
        opened.set()
        return real(target)

    monkeypatch.setattr(module, "client", client)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with locked(lab.path(TRACK_LOCK)):  # a first track, holding the lab
        second = threading.Thread(target=track_lab, args=(lab.lab, uri, "tickets"))
        second.start()
        assert not opened.wait(3)  # it has not opened MLflow while the first holds the lab
    second.join(120)
    assert opened.is_set() and not second.is_alive()
    assert set(read_back(uri, "tickets")) == {r["id"] for r in lab.runs()} | {"lab"}
