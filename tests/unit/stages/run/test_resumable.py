"""What `resume` refuses before anything loads: a run it cannot continue, saying why."""

from __future__ import annotations

import pytest

from tunelab.core.errors import TunelabError
from tunelab.stages.run.resumable import check_resumable


def test_a_run_stopped_before_its_first_checkpoint_is_told_so_not_to_set_the_cadence(tmp_path):
    """A kill during the first checkpoint read "set training.checkpoint_every", already 100."""
    record = {"id": "r004-k", "status": "interrupted", "process": {}}
    record["spec"] = {"training": {"checkpoint_every": 100}}
    with pytest.raises(TunelabError, match=r"before its first checkpoint \(every 100 steps\)"):
        check_resumable(record, tmp_path)
    record["spec"] = {"training": {"checkpoint_every": None}}
    with pytest.raises(TunelabError, match=r"set training\.checkpoint_every"):
        check_resumable(record, tmp_path)


def test_weights_written_but_not_yet_recorded_are_no_trained_run_to_evaluate(tmp_path):
    """A stop between writing weights/ and recording them: `resume` met `KeyError: 'dir'` (an
    internal error) where the run itself had said it could not be resumed."""
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "model.safetensors").write_bytes(b"whole, but vouched by nothing")
    record = {"id": "r009-e", "status": "interrupted", "process": {}, "training": {"steps": 8}}
    record["spec"] = {"training": {"checkpoint_every": None}}
    with pytest.raises(TunelabError, match="has no checkpoint to resume from"):
        check_resumable(record, tmp_path)
    record["weights"] = {"dir": "weights", "files": ["model.safetensors"], "sha256": {}}
    check_resumable(record, tmp_path)  # recorded: resuming evaluates them


def test_a_checkpoint_the_record_kept_and_the_folder_lacks_is_said_missing(tmp_path):
    """A lab cloned from git without its checkpoint: "it stopped before its first checkpoint"
    for a run whose record says it stopped after step 423 with one."""
    record = {"id": "r005-long", "status": "interrupted", "process": {}, "checkpoint": "checkpoint"}
    record["spec"] = {"training": {"checkpoint_every": 20}}
    with pytest.raises(TunelabError) as err:
        check_resumable(record, tmp_path)
    assert f"r005-long's checkpoint ({tmp_path / 'checkpoint'}) is missing" in str(err.value)
    assert "not copied (or committed) with the lab" in str(err.value)
