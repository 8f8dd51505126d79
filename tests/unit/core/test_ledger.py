"""`ledger.recording`: a run's record is closed however its work ends, and says what is true."""

from __future__ import annotations

import errno
import json
from types import SimpleNamespace

import pytest

from tunelab.core import ledger
from tunelab.core.errors import Interrupted, TrainingInterrupted
from tunelab.core.lab import lab_flag
from tunelab.core.store import Store


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the lab is where the user is: its commands need no --lab
    return SimpleNamespace(store=Store(tmp_path), path=tmp_path)


def opened(lab) -> dict:
    run_id, _ = lab.store.new_run("x")
    record = {
        "id": run_id,
        "kind": "variant",
        "status": "running",
        "data_version": "v1",
        "spec": {},
    }
    lab.store.write_record(run_id, record)
    return record


def on_disk(lab, record) -> dict:
    return json.loads((lab.store.runs_dir / record["id"] / "record.json").read_text())


def statuses(lab) -> list[str]:
    return [e["event"] for e in lab.store.events()][1:]  # after the record's first write


def test_work_that_ends_normally_is_completed(lab):
    record = opened(lab)
    with ledger.recording(lab, record):
        record["metrics"] = {"accuracy": 1.0}
    assert on_disk(lab, record)["status"] == "completed" and on_disk(lab, record)["metrics"]
    assert statuses(lab) == ["run_completed"]


def test_a_stop_with_a_checkpoint_is_interrupted_and_resumable(lab):
    record = opened(lab)
    resumable = ledger.recording(lab, record, lambda: "checkpoint")
    with pytest.raises(Interrupted) as caught, resumable:
        raise KeyboardInterrupt("SIGTERM")
    err = caught.value
    assert (err.cause, err.run, err.resumable) == ("SIGTERM", "r001-x", True)
    assert "`tunelab resume r001-x` continues it" in err.outcome
    saved = on_disk(lab, record)
    assert saved["status"] == "interrupted" and saved["checkpoint"] == "checkpoint"
    assert isinstance(err, KeyboardInterrupt)  # callers that stop on Ctrl-C still do


def test_a_lab_elsewhere_is_named_in_the_command_that_goes_on(lab, tmp_path, monkeypatch):
    """A demo's lab lies in demo-lab/images: `tunelab resume r003-lora` alone, as its Ctrl-C
    message said, was refused where the demo ran."""
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    record = opened(lab)
    with pytest.raises(Interrupted) as caught, ledger.recording(lab, record, lambda: "c"):
        raise KeyboardInterrupt("Ctrl-C")
    assert f"`tunelab resume r001-x --lab {tmp_path}` continues it" in caught.value.outcome
    monkeypatch.chdir(tmp_path.parent)
    assert lab_flag(tmp_path) == f" --lab {tmp_path.name}"  # inside the folder: relative


def test_a_stop_without_a_checkpoint_does_not_offer_resume(lab):
    record = opened(lab)
    with pytest.raises(Interrupted) as caught, ledger.recording(lab, record, lambda: None):
        raise TrainingInterrupted(3, None, "Ctrl-C")
    assert not caught.value.resumable and "tunelab resume" not in caught.value.outcome
    assert "cannot be resumed" in caught.value.outcome
    assert caught.value.cause == "Ctrl-C; stopped after step 3"
    assert on_disk(lab, record)["status"] == "interrupted"


def test_a_crash_is_failed_with_its_traceback_and_goes_on_unchanged(lab):
    record = opened(lab)
    with pytest.raises(RuntimeError, match="fire"), ledger.recording(lab, record):
        raise RuntimeError("fire")
    saved = on_disk(lab, record)
    assert saved["status"] == "failed" and "RuntimeError: fire" in saved["error"]
    assert saved["checkpoint"] is None


def test_a_crash_that_leaves_a_checkpoint_says_to_resume(lab, capsys):
    """A rank killed under torchrun: the others fail on a lost peer, and the checkpoint it had
    written was not mentioned (the run read "failed", nothing said it could resume)."""
    record = opened(lab)
    with pytest.raises(RuntimeError) as caught, ledger.recording(lab, record, lambda: "ckpt"):
        raise RuntimeError("Connection closed by peer")
    assert on_disk(lab, record)["checkpoint"] == "ckpt"
    (note,) = caught.value.__notes__
    assert note == (
        f"run {record['id']} failed; its checkpoint (ckpt) remains: `tunelab resume "
        f"{record['id']}` continues it from there"
    )


def test_a_record_that_cannot_be_written_does_not_hide_the_error(lab, monkeypatch):
    record = opened(lab)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(lab.store, "write_record", full)
    with pytest.raises(RuntimeError, match="first"), ledger.recording(lab, record):
        raise RuntimeError("first")
    monkeypatch.undo()
    assert on_disk(lab, record)["status"] == "running"  # shown as lost, never half-written


@pytest.mark.parametrize("beat", ['{"step": 3, "of": 10, "ti', '{"time": "yesterday"}', "[]"])
def test_a_damaged_heartbeat_falls_back_to_the_record_s_time(lab, beat):
    """A heartbeat cut short (a disk that filled as it was written) made `tunelab runs` an
    internal error (JSONDecodeError): the record's own time judges the run instead."""
    record = opened(lab) | {"updated": "2020-01-01T00:00:00+00:00"}  # long ago: lost
    run_dir = lab.store.runs_dir / record["id"]
    (run_dir / ledger.HEARTBEAT).write_text(beat)
    assert ledger.effective_status(record, run_dir) == "lost"
    assert ledger.effective_status(record | {"updated": ledger.now()}, run_dir) == "running"


def test_a_replicate_group_run_again_after_a_stop_is_continued_by_the_later_one():
    """Followed to the letter, a stopped noise floor's first group kept saying it lacked a seed
    and that its command trains it: run again, that command trained nothing."""
    from tunelab.core.ledger import _continued

    floor = {"kind": "noise", "name": "lora", "of": "r003-lora", "seeds": [7, 11, 13]}
    groups = [
        floor | {"id": "g001"},
        {"id": "g002", "kind": "replicates", "name": "lora", "seeds": [7, 11, 13]},
        floor | {"id": "g003"},
        floor | {"id": "g004", "seeds": [7, 11]},  # another floor: two seeds
    ]
    assert _continued(groups) == [("g001", "g003")]
