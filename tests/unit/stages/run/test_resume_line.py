"""`resume` says where the run goes on from and on what: the checkpoint's step and the processes
that wrote it, and the ones it goes on with where they differ (it began at `train: step 7/60`)."""

from __future__ import annotations

import json

from tunelab.stages.run.resume import _from_line
from tunelab.training.distributed import World


def test_a_resume_names_its_step_and_the_processes_that_wrote_the_checkpoint(tmp_path):
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"step": 6}))  # one process wrote it (no `written_by`)
    assert _from_line("r006-one", tmp_path, World()) == (
        "resuming r006-one from its checkpoint at step 6, written by 1 process"
    )
    assert _from_line("r006-one", tmp_path, World(0, 2, 0, "ddp")) == (
        "resuming r006-one from its checkpoint at step 6, written by 1 process, on 2 processes "
        "(ddp) now"
    )
    state.write_text(json.dumps({"step": 4, "written_by": {"world_size": 2, "strategy": "fsdp"}}))
    assert _from_line("r003", tmp_path, World(0, 2, 0, "fsdp")).endswith(
        "at step 4, written by 2 processes (fsdp)"
    )
