"""The loop never waits for the device inside a step: tunelab's own code reads a tensor to the
host once per optimizer step (the step's totals, `World.step_totals`), not per microbatch, and
the loss history goes to its own file, never into a checkpoint."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from tunelab.core.spec import TrainingSpec
from tunelab.modeling.checkpoint import CHECKPOINT_DIR, find_checkpoint
from tunelab.training.loop import train

sys.path.insert(0, str(Path(__file__).parent))
from test_loop import Bag, examples

READS = ("item", "tolist", "__float__", "__int__", "__bool__", "__index__")
SOURCE = str(Path(__file__).parents[3] / "src" / "tunelab")


HOST_SIDE = {"example_order"}
"""Functions whose tensors are made on the host by design (the seeded order of examples)."""


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """Every read of a tensor to the host made by tunelab's own code, as `file:line` (the
    functions of `HOST_SIDE` left out)."""
    seen: list[str] = []
    for name in READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, **kwargs):
            caller = sys._getframe(1)
            code = caller.f_code
            if code.co_filename.startswith(SOURCE) and code.co_name not in HOST_SIDE:
                seen.append(f"{Path(code.co_filename).name}:{caller.f_lineno}")
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    return seen


def test_one_host_read_per_step_whatever_the_microbatches(reads) -> None:
    cfg = TrainingSpec(
        lr=0.05, global_batch=6, microbatch=2, budget={"steps": 4}, max_grad_norm=1.0
    )
    out = train(Bag(), examples(), cfg, torch.device("cpu"), 0)
    per_step = [r for r in reads if r.startswith("distributed.py")]
    assert len(per_step) == 4, reads  # 3 microbatches a step: one read a step, not three
    assert not [r for r in reads if r.startswith("step.py")], reads  # none inside a step
    assert len(reads) == 4 + 1, reads  # and the rank's own token count, once, at the end
    assert len(out["history"]) == 4 and all(h["grad_norm"] is not None for h in out["history"])


def test_the_history_is_appended_to_its_file_and_kept_out_of_checkpoints(tmp_path) -> None:
    cfg = TrainingSpec(
        lr=0.05, global_batch=6, microbatch=3, budget={"steps": 5}, checkpoint_every=2
    )
    out = train(Bag(), examples(), cfg, torch.device("cpu"), 0, run_dir=tmp_path)
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert lines == out["history"] and [h["step"] for h in lines] == [1, 2, 3, 4, 5]
    state = json.loads((find_checkpoint(tmp_path / CHECKPOINT_DIR) / "state.json").read_text())
    assert state["step"] == 4 and "history" not in state
