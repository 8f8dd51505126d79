"""Under torchrun every rank joins the process group before rank 0 opens the run's record: a
rank that died at its start had left a record `running` (listed `lost`, no error), rank 0 stuck
in the rendezvous until torchrun killed it."""

from __future__ import annotations

import pytest

from tunelab.core.lab import open_lab
from tunelab.data import build_data
from tunelab.stages.run import variant


def test_no_record_is_opened_before_every_rank_has_joined(make_lab, monkeypatch):
    lab = open_lab(make_lab(), {})
    build_data(lab.spec, lab.path, lab.store)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")

    import torch.distributed as dist

    def rendezvous(backend, **kwargs):  # rank 1 never comes
        raise RuntimeError("rank 1 ran out of memory at its start")

    monkeypatch.setattr(dist, "init_process_group", rendezvous)
    with pytest.raises(RuntimeError, match="rank 1 ran out of memory"):
        variant.run_variant(lab, "ddp")
    assert lab.store.runs() == [] and not lab.store.runs_dir.exists()
