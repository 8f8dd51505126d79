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
