"""The loop never waits for the device inside a step: tunelab's own code reads a tensor to the
host once per optimizer step (the step's totals, `World.step_totals`), not per microbatch, and
the loss history goes to its own file, never into a checkpoint."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tunelab.core.spec import TrainingSpec
from tunelab.modeling.checkpoint_files import CHECKPOINT_DIR, find_checkpoint
from tunelab.modeling.model import load_causal
from tunelab.training.loop import train
from tunelab.training.step import backward, make_batch, summed_loss
from tunelab.training.validate import Validation

sys.path.insert(0, str(Path(__file__).parent))
from test_loop import Bag, examples

READS = ("item", "tolist", "__float__", "__int__", "__bool__", "__index__")
SOURCE = str(Path(__file__).parents[3] / "src" / "tunelab")


CPU = torch.device("cpu")
HOST_SIDE = {"example_order", "target_index"}
"""Functions whose tensors are made on the host by design: the seeded order of examples, and
where a batch's targets are (`modeling.loss_positions`, while the batch is built)."""


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


def test_a_validation_measurement_reads_the_device_once_whatever_its_batches(reads) -> None:
    validation = Validation(examples(10), every=2, batch_size=3)  # 4 batches a measurement
    loss = validation.measure(Bag(), CPU, 0)
    assert len(reads) == 1 and reads[0].startswith("validate.py"), reads  # once, at the end
    model = Bag().eval()
    with torch.no_grad():
        by_hand = [
            float(summed_loss(model, make_batch(examples(10)[i : i + 3], 0, CPU)))
            for i in range(0, 10, 3)
        ]
    assert loss == sum(by_hand) / 10  # the same float64 sum, to the bit


def test_the_history_is_appended_to_its_file_and_kept_out_of_checkpoints(tmp_path) -> None:
    cfg = TrainingSpec(
        lr=0.05, global_batch=6, microbatch=3, budget={"steps": 5}, checkpoint_every=2
    )
    out = train(Bag(), examples(), cfg, torch.device("cpu"), 0, run_dir=tmp_path)
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert lines == out["history"] and [h["step"] for h in lines] == [1, 2, 3, 4, 5]
    state = json.loads((find_checkpoint(tmp_path / CHECKPOINT_DIR) / "state.json").read_text())
    assert state["step"] == 4 and "history" not in state


DATA_SIZED = {"nonzero", "masked_select", "_local_scalar_dense", "unique", "_unique2"}
"""Operators whose result's size or value the host must read from the device (on a GPU, each
waits for every kernel queued before it); with an index of booleans, `index` and `index_put`
are the same (`hidden[mask]` is a `nonzero` inside)."""


class _DeviceReads(TorchDispatchMode):
    """Each operator above that runs, as (operator, the innermost tunelab or transformers file
    on the Python stack that led to it)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__.split(".")[0]
        indices = args[1] if name.startswith(("index", "_index_put")) and len(args) > 1 else ()
        boolean = any(isinstance(t, torch.Tensor) and t.dtype == torch.bool for t in indices or ())
        if name in DATA_SIZED or boolean:
            files = [
                Path(f.filename)
                for f in traceback.extract_stack()
                if "tunelab" in f.filename or "transformers" in f.filename
            ]
            place = next((f for f in reversed(files) if "tests" not in f.parts), files[-1])
            owner = "tunelab" if "tunelab" in place.parts else "transformers"
            self.seen.append((name, f"{owner}/{place.name}"))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("packing", [False, True], ids=["padded", "packed"])
def test_a_causal_microbatch_never_makes_the_host_read_the_device(
    tiny_llama, render_pages, packing
) -> None:
    """The causal LM's answer-only loss selects its targets at positions the collate found on
    the host (`modeling.loss_positions`): nothing in a training microbatch's forward or backward
    waits on the device but transformers' own look at the attention mask (whether it can skip
    the mask, or whether the row holds packed sequences)."""
    rows = [("short", '{"a": 1}'), ("a much longer page " * 5, '{"b": 22}')]
    spec, pages = render_pages(rows)
    model = load_causal(spec, tiny_llama, CPU).train()
    batch = make_batch(pages, 0, CPU, packing=packing)
    with _DeviceReads() as reads:
        backward(model, batch, 10.0, CPU, "fp32")
    assert not [r for r in reads.seen if r[1].startswith("tunelab/")], reads.seen
    assert {place for _, place in reads.seen} <= {"transformers/masking_utils.py"}, reads.seen
    assert len(reads.seen) == (1 if packing else 2), reads.seen
