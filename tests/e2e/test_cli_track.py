"""`tunelab track` through the CLI on a lab the CLI wrote (the format-2 fixture lab: baselines,
a LoRA run, a comparison, the final; nothing trains here): every run, param, metric and tag read
back with MLflow's own client, then a second track that adds nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mlflow.tracking import MlflowClient

from tunelab.cli import main
from tunelab.core.layout import FINALS
from tunelab.core.store import Store

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lab-format2"


def test_track_writes_the_lab_into_mlflow_once(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    lab = tmp_path / "topics"
    shutil.copytree(FIXTURE, lab)
    where = ["--lab", str(lab)]
    assert main(["report", *where]) == 0
    capsys.readouterr()

    assert main(["track", *where]) == 0
    shown = " ".join(capsys.readouterr().out.split())  # as read, whatever the wrapping
    assert "-> MLflow experiment 'topics' (id 1, new)" in shown
    assert f"store sqlite:///{lab}/mlflow.db (the default)" in shown
    assert "3 new, 0 updated, 0 unchanged" in shown and "worse" in shown
    assert "report page" not in shown  # written just now: the lab as it stands

    mlflow = MlflowClient(tracking_uri=f"sqlite:///{lab}/mlflow.db")
    experiment = mlflow.get_experiment_by_name("topics")
    assert experiment is not None
    held = {r.info.run_name: r for r in mlflow.search_runs([experiment.experiment_id])}
    store = Store(lab)
    records = {r["id"]: r for r in store.runs()}
    assert set(held) == {*records, "lab"}
    for run_id, record in records.items():
        run = held[run_id].data
        assert run.tags["tunelab.run_id"] == run_id
        assert run.tags["tunelab.state"] == record["status"] == "completed"
        assert run.tags["tunelab.data_version"] == record["data_version"]
        assert run.tags.get("tunelab.parent") == record.get("parent")
        assert run.params["method.type"] == record["spec"]["method"]["type"]
        assert run.params["training.lr"] == str(record["spec"]["training"]["lr"])
        assert run.metrics["validation/macro_f1"] == record["metrics"]["macro_f1"]
        steps = (record.get("training") or {}).get("history") or []
        loss = mlflow.get_metric_history(held[run_id].info.run_id, "train/loss")
        assert [(m.step, m.value) for m in loss] == [(s["step"], s["loss"]) for s in steps]
        files = [f.path for f in mlflow.list_artifacts(held[run_id].info.run_id)]
        finals = [f for f in store.records(FINALS) if f["run"] == run_id]
        assert files == (["finals", "record.json"] if finals else ["record.json"])
        if finals:  # the sealed test split's score, once `final` opened it for this run
            assert run.metrics["test/macro_f1"] == finals[-1]["metrics"]["macro_f1"]
            assert run.tags["tunelab.final"] == str(finals[-1]["n"])
        else:
            assert not [k for k in run.metrics if k.startswith("test/")]
    lora = next(i for i in records if i.endswith("-lora"))
    verdict = store.judgement(lora)
    assert verdict is not None and held[lora].data.tags["tunelab.verdict"] == verdict[1]["verdict"]
    lab_files = [f.path for f in mlflow.list_artifacts(held["lab"].info.run_id)]
    assert lab_files == ["comparisons", "lab-report.html"]

    assert main(["track", *where, "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["counts"] == {"new": 0, "updated": 0, "unchanged": 3, "skipped": 0, "doubted": 0}
    assert not any(again["added"].values()) and again["lab_run"]["stale_report"] is None
    store.log_event("invalidated", run=lora)  # the lab moved on after its page was written
    assert main(["track", *where]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "report page: lab-report.html was written before 1 later event (the last: " in shown
    assert "`tunelab report`, then `tunelab track` again, uploads the lab as it stands" in shown
    assert main(["track", *where]) == 0
    assert "0 new, 0 updated, 3 unchanged: nothing added" in capsys.readouterr().out
    assert len(mlflow.search_runs([experiment.experiment_id])) == len(records) + 1


def test_mlflow_s_telemetry_is_off_unless_the_user_turned_it_on(tmp_path, monkeypatch):
    """Offline: MLflow's telemetry fetched a config from the internet and wrote an installation
    id into ~/.config/mlflow as soon as it ran."""
    from mlflow.environment_variables import MLFLOW_DISABLE_TELEMETRY

    from tunelab.stages.track.uri import client, resolve

    monkeypatch.delenv("MLFLOW_DISABLE_TELEMETRY", raising=False)
    client(resolve(tmp_path, None))
    assert MLFLOW_DISABLE_TELEMETRY.get() is True
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "false")  # the user's own choice stands
    client(resolve(tmp_path, None))
    assert MLFLOW_DISABLE_TELEMETRY.get() is False
