"""Run states that are never lost: interrupted (a real SIGTERM in training, a real Ctrl-C in
evaluation), resumed to the same result, failed with its traceback, invalid with its reason,
lost after kill -9. Kills at random moments of every command: `test_faults.py`."""

from __future__ import annotations

import json
import pickle
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
STOPPED = {k: v for k, v in LONG.items() if k != "checkpoint_every"} | {"budget": {"steps": 120}}
"""Stopped by a SIGTERM after step 5, resumed, and trained again straight through: 120 steps
leave the signal a second or more to land and take 8 s where 400 took 14. No checkpoint cadence
(the default): the checkpoint resumed from is the one the stop itself saves."""


def start_run(lab: Path, name: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tunelab.cli", "run", "--lab", str(lab), "--name", name, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as from a terminal, even when this suite runs in the background (where
        # SIGINT starts ignored, and tunelab leaves an ignored signal ignored)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def wait_for_step(run_dir: Path, step: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Until the run's history (a line a step, `training.loop.HistoryFile`) reaches `step`; the
    heartbeat is written only every few seconds."""
    history = run_dir / "history.jsonl"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        lines = history.read_text().splitlines() if history.exists() else []
        if len([line for line in lines if line.endswith("}")]) >= step:
            return
        time.sleep(0.01)
    raise TimeoutError(f"no step {step} in {timeout}s")


class Planted:
    """A pickle that leaves a file where it is unpickled: proof that code ran."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def test_sigterm_then_resume_ends_like_an_uninterrupted_run(make_lab, capsys):
    lab = make_lab(training=STOPPED)
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0
    proc = start_run(lab, "stopped")
    run_dir = lab / ".tunelab" / "runs" / "r001-stopped"
    wait_for_step(run_dir, 5, proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    record = json.loads((run_dir / "record.json").read_text())
    assert record["status"] == "interrupted" and record["checkpoint"] == "checkpoint"
    stopped_at = json.loads((run_dir / "checkpoint" / "state.json").read_text())["step"]
    assert 5 <= stopped_at < 120

    # a checkpoint file changed since it was written is refused by name, the run left as it is,
    # and fsck says so too (a flipped byte was resumed from; a cut file failed the run)
    tensors = run_dir / "checkpoint" / "trainable.safetensors"
    whole = tensors.read_bytes()
    tensors.write_bytes(whole[:-1] + bytes([whole[-1] ^ 1]))
    code, refused = tl(capsys, "resume", "--lab", str(lab), "r001-stopped")
    assert code == 2 and f"{tensors}: sha256 " in refused["error"], refused
    assert "checkpoint is not as the run wrote it" in refused["error"]
    assert json.loads((run_dir / "record.json").read_text())["status"] == "interrupted"
    code, checked = tl(capsys, "fsck", "--lab", str(lab))
    assert code == 1 and any(
        "the checkpoint is not as written" in p["problem"] for p in checked["problems"]
    )
    tensors.write_bytes(whole)
    # a file dropped in is refused before any loader opens it: DCP's `.metadata` is a pickle
    planted = run_dir / "checkpoint" / ".metadata"
    marker = lab / "unpickled"
    planted.write_bytes(pickle.dumps(Planted(str(marker))))
    code, refused = tl(capsys, "resume", "--lab", str(lab), "r001-stopped")
    assert code == 2 and f"{planted}: not written with the checkpoint" in refused["error"]
    assert not marker.exists()
    code, checked = tl(capsys, "fsck", "--lab", str(lab))
    assert code == 1 and any(".metadata: not written" in p["problem"] for p in checked["problems"])
    planted.unlink()

    code, resumed = tl(capsys, "resume", "--lab", str(lab), "r001-stopped")
    assert code == 0, resumed
    assert resumed["status"] == "completed" and resumed["resumed"]
    assert not (run_dir / "checkpoint").exists()  # completed: nothing resumes it again
    code, straight = tl(capsys, "run", "--lab", str(lab), "--name", "straight")
    assert code == 0
    assert not (run_dir.parent / "r002-straight" / "checkpoint").exists()  # written, then gone
    assert resumed["metrics"] == straight["metrics"]
    losses = [h["loss"] for h in resumed["training"]["history"]]
    assert losses == pytest.approx([h["loss"] for h in straight["training"]["history"]], abs=1e-6)
    for key in ("tokens", "lr"):  # counted on from the stop, the schedule followed through it
        assert [h[key] for h in resumed["training"]["history"]] == [
            h[key] for h in straight["training"]["history"]
        ], key
    assert resumed["training"]["tokens"] == straight["training"]["tokens"]
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


def test_running_out_of_memory_is_failed_and_says_what_to_lower(make_lab, capsys, monkeypatch):
    import torch

    lab = make_lab()
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError(
            "CUDA out of memory. Tried to allocate 1024.00 MiB. GPU 0 has a total capacity of "
            "139.80 GiB of which 253.12 MiB is free. Of the allocated memory 138.54 GiB is "
            "allocated by PyTorch. See documentation for Memory Management  (https://docs...)"
        )

    monkeypatch.setattr("tunelab.stages.run.variant.train", out_of_memory)
    code, err = tl(capsys, "run", "--lab", str(lab))
    assert code == 2 and not err["internal"]  # the user's to fix, as a full disk is
    assert err["error"].startswith("out of memory (CUDA out of memory. Tried to allocate 1024")
    assert "allocated by PyTorch)" in err["error"] and "https" not in err["error"]
    assert "training.microbatch" in err["error"] and "tunelab size" in err["error"]
    (record,) = [json.loads(p.read_text()) for p in lab.glob(".tunelab/runs/*/record.json")]
    assert record["status"] == "failed" and "OutOfMemoryError" in record["error"]


def test_invalidate_keeps_the_run_with_its_reason(make_lab, capsys):
    lab = str(make_lab())
    tl(capsys, "data", "--lab", lab)
    _, run = tl(capsys, "run", "--lab", lab, "--name", "lora")  # no baseline yet: said so
    assert run["parent"] is None and "run `tunelab baseline`" in run["preflight"]["no_baseline"]
    assert main(["invalidate", "--lab", lab, "r001-lora", "--json"]) == 2  # --why is required
    refused = json.loads(capsys.readouterr().out)  # said as JSON, like every other error
    assert refused == {
        "error": "the following arguments are required: --why",
        "command": "invalidate",
        "internal": False,
    }
    code, record = tl(capsys, "invalidate", "--lab", lab, "r001-lora", "--why", "leaked labels")
    assert code == 0 and record["status"] == "invalid"
    code, runs = tl(capsys, "runs", "--lab", lab)
    assert runs[0]["status"] == "invalid"
    assert record["invalidated"] == {
        **record["invalidated"],
        "why": "leaked labels",
        "previous_status": "completed",
    }
    code, again = tl(capsys, "invalidate", "--lab", lab, "r001-lora", "--why", "again")
    assert code == 2 and again["error"] == (  # it had replaced the first reason in the record
        "r001-lora is invalid already (leaked labels): its record keeps that reason; nothing "
        "was changed"
    )
    # `noise` on a folder that is no lab: it had said "`tunelab run` first"
    code, refused = tl(capsys, "noise", "--lab", f"{lab}-typo")
    assert code == 2 and refused["error"].startswith(f"{lab}-typo is not a tunelab lab")


def test_kill_9_leaves_a_lost_run(make_lab, capsys):
    lab = make_lab(training=LONG)
    tl(capsys, "data", "--lab", str(lab))
    proc = start_run(lab, "doomed")
    wait_for_step(lab / ".tunelab" / "runs" / "r001-doomed", 2, proc)
    _, running = tl(capsys, "runs", "--lab", str(lab))  # where it is, from its heartbeat
    (at,) = [r["at"] for r in running]
    assert running[0]["status"] == "running" and 1 <= at["step"] < at["of"] == 400
    proc.kill()
    proc.wait()
    _, runs = tl(capsys, "runs", "--lab", str(lab))
    assert [r["status"] for r in runs] == ["lost"]
    # every command says so: `final`, `export` and `noise` had called it running
    for command in ("final", "export", "noise"):
        code, refused = tl(capsys, command, "r001", "--lab", str(lab))
        assert code == 2 and refused["error"].startswith("r001-doomed is ")
        assert " lost" in refused["error"] and "running" not in refused["error"], refused
    _, invalid = tl(capsys, "invalidate", "r001", "--why", "killed", "--lab", str(lab))
    assert invalid["invalidated"]["previous_status"] == "lost"


def wait_for_event(lab: Path, event: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    log = lab / ".tunelab" / "events.jsonl"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if log.exists() and f'"event": "{event}"' in log.read_text():
            return
        time.sleep(0.01)
    raise TimeoutError(f"no {event} event in {timeout}s")


def test_ctrl_c_during_evaluation_stops_at_once_and_records_interrupted(
    make_extraction_lab, capsys
):
    lab = make_extraction_lab(
        training={
            "lr": 5e-3,
            "global_batch": 4,
            "microbatch": 2,
            "budget": {"steps": 3},
            "checkpoint_every": 1,
        },
        evaluation={"batch_size": 1, "max_new_tokens": 100},  # seconds of generation
    )
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0
    proc = start_run(lab, "gen")
    wait_for_event(lab, "run_evaluating", proc)
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130 and time.monotonic() - sent < 30  # not after the evaluation
    record = json.loads((lab / ".tunelab" / "runs" / "r001-gen" / "record.json").read_text())
    assert record["status"] == "interrupted" and "metrics" not in record
    assert record["checkpoint"] == "checkpoint" and "KeyboardInterrupt: Ctrl-C" in record["error"]
    message = json.loads(out)["error"]
    # the weights were saved as training ended: resuming evaluates them, trains nothing again
    assert message.startswith("interrupted (Ctrl-C): run r001-gen finished training and saved")
    assert f"`tunelab resume r001-gen --lab {lab}` evaluates it" in message  # lab elsewhere
    # weights changed since they were saved are not evaluated (fsck skips a run not completed)
    weights = lab / ".tunelab" / "runs" / "r001-gen" / record["weights"]["dir"]
    first = weights / sorted(record["weights"]["sha256"])[0]
    saved = first.read_bytes()
    first.write_bytes(saved[:-1] + bytes([saved[-1] ^ 1]))
    code, refused = tl(capsys, "resume", "--lab", str(lab), "r001-gen")
    assert code == 2 and "saved weights are not as it wrote them" in refused["error"]
    code, found = tl(capsys, "fsck", "--lab", str(lab))
    assert code == 1 and [p["path"] for p in found["problems"]] == [str(first.relative_to(lab))]
    first.write_bytes(saved)
    code, resumed = tl(capsys, "resume", "--lab", str(lab), "r001-gen")
    assert code == 0 and resumed["status"] == "completed", resumed
    assert resumed["resumed"][-1]["evaluated_only"] and resumed["training"] == record["training"]
    code, straight = tl(capsys, "run", "--lab", str(lab), "--name", "straight")
    assert code == 0 and resumed["metrics"] == straight["metrics"]
    runs = lab / ".tunelab" / "runs"
    preds = [(runs / r / "predictions.jsonl").read_text() for r in ("r001-gen", "r002-straight")]
    assert preds[0] == preds[1]


def test_a_run_name_that_is_a_path_is_refused_before_anything_loads(make_lab, capsys):
    lab = make_lab()
    code, err = tl(capsys, "run", "--lab", str(lab), "--name", "..")
    assert code == 2 and "run name '..' is not allowed" in err["error"]
    assert "letters, digits, '.', '_' or '-'" in err["error"]
    assert not (lab / ".tunelab" / "runs").exists()
