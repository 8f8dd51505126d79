"""Run states that are never lost: interrupted (a real SIGTERM), resumed to the same result,
failed with its traceback, invalid with its reason, lost after kill -9, and no unreadable
record whatever moment a kill lands."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli import tl

from tunelab.cli import main

LONG = {
    "lr": 5e-3,
    "global_batch": 8,
    "microbatch": 4,
    "budget": {"steps": 400},
    "seed": 0,
    "checkpoint_every": 1,
}


def start_run(lab: Path, name: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tunelab.cli", "run", "--lab", str(lab), "--name", name, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_step(run_dir: Path, step: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    beat = run_dir / "heartbeat.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        if beat.exists() and json.loads(beat.read_text())["step"] >= step:
            return
        time.sleep(0.01)
    raise TimeoutError(f"no step {step} in {timeout}s")


def test_sigterm_then_resume_ends_like_an_uninterrupted_run(make_lab, capsys):
    lab = make_lab(training=LONG)
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0
    proc = start_run(lab, "stopped")
    run_dir = lab / ".tunelab" / "runs" / "r001-stopped"
    wait_for_step(run_dir, 5, proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    record = json.loads((run_dir / "record.json").read_text())
    assert record["status"] == "interrupted" and record["checkpoint"] == "checkpoint"
    stopped_at = json.loads((run_dir / "checkpoint" / "state.json").read_text())["step"]
    assert 5 <= stopped_at < 400

    code, resumed = tl(capsys, "resume", "--lab", str(lab), "r001-stopped")
    assert code == 0, resumed
    assert resumed["status"] == "completed" and resumed["resumed"]
    code, straight = tl(capsys, "run", "--lab", str(lab), "--name", "straight")
    assert code == 0
    assert resumed["metrics"] == straight["metrics"]
    losses = [h["loss"] for h in resumed["training"]["history"]]
    assert losses == pytest.approx([h["loss"] for h in straight["training"]["history"]], abs=1e-6)
    preds = [
        (run_dir.parent / r / "predictions.jsonl").read_text()
        for r in ("r001-stopped", "r002-straight")
    ]
    assert preds[0] == preds[1]


def test_a_crash_is_recorded_as_failed_with_its_traceback(make_lab, capsys, monkeypatch):
    lab = make_lab()
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0

    def broken(*args, **kwargs):
        raise RuntimeError("the GPU caught fire")

    monkeypatch.setattr("tunelab.stages.run.variant.train", broken)
    code, err = tl(capsys, "run", "--lab", str(lab))
    assert code == 1 and "caught fire" in err["error"]
    (record,) = [json.loads(p.read_text()) for p in lab.glob(".tunelab/runs/*/record.json")]
    assert record["status"] == "failed" and "RuntimeError: the GPU caught fire" in record["error"]


def test_invalidate_keeps_the_run_with_its_reason(make_lab, capsys):
    lab = str(make_lab())
    tl(capsys, "data", "--lab", lab)
    tl(capsys, "run", "--lab", lab, "--name", "lora")
    with pytest.raises(SystemExit):  # --why is required
        main(["invalidate", "--lab", lab, "r001-lora", "--json"])
    capsys.readouterr()
    code, record = tl(capsys, "invalidate", "--lab", lab, "r001-lora", "--why", "leaked labels")
    assert code == 0 and record["status"] == "invalid"
    code, runs = tl(capsys, "runs", "--lab", lab)
    assert runs[0]["status"] == "invalid"
    assert record["invalidated"] == {
        **record["invalidated"],
        "why": "leaked labels",
        "previous_status": "completed",
    }


def test_kill_9_leaves_a_lost_run(make_lab, capsys):
    lab = make_lab(training=LONG)
    tl(capsys, "data", "--lab", str(lab))
    proc = start_run(lab, "doomed")
    wait_for_step(lab / ".tunelab" / "runs" / "r001-doomed", 2, proc)
    proc.kill()
    proc.wait()
    _, runs = tl(capsys, "runs", "--lab", str(lab))
    assert [r["status"] for r in runs] == ["lost"]


@pytest.mark.slow
def test_kill_9_at_random_moments_never_leaves_an_unreadable_record(make_lab, capsys):
    lab = make_lab(training={**LONG, "budget": {"steps": 60}})
    tl(capsys, "data", "--lab", str(lab))
    rng = random.Random(0)
    runs_dir = lab / ".tunelab" / "runs"
    for i in range(12):
        proc = start_run(lab, f"k{i}")
        record = runs_dir / f"r{i + 1:03d}-k{i}" / "record.json"
        deadline = time.monotonic() + 120
        while not record.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # the run exists: from here on every moment is a fair target
        time.sleep(rng.uniform(0.0, 3.0))
        proc.kill()
        proc.wait()
        for path in (lab / ".tunelab").rglob("*.json"):
            json.loads(path.read_text())  # every record, heartbeat, manifest, checkpoint state
    assert all(
        line.strip() for line in (lab / ".tunelab" / "events.jsonl").read_text().splitlines()[:-1]
    )
    code, runs = tl(capsys, "runs", "--lab", str(lab))
    assert code == 0 and len(runs) == 12
    assert {r["status"] for r in runs} <= {"lost", "completed", "interrupted"}
    assert os.path.exists(lab / ".tunelab" / "events.jsonl")
