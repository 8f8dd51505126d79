"""Two processes under torchrun (gloo on CPU) take the steps one process takes.

The lab is generative, so the two ranks' shares of a global batch hold different numbers of
target tokens: the per-token loss must still be normalised by the whole global batch's count.
Dropout is off (LoRA dropout 0; the tiny Llama has none), so the only difference left between
one and two processes is the order of floating-point sums.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from safetensors.torch import load_file

from tunelab.cli import main
from tunelab.core.store import Store

pytestmark = pytest.mark.slow

TRAINING = {"lr": 5e-3, "global_batch": 8, "microbatch": 2, "budget": {"steps": 4}, "seed": 0}
LOSS_TOLERANCE = 1e-5
"""Relative, per step (sums in another order)."""
WEIGHT_TOLERANCE = 1e-4
"""Absolute, the largest difference of any trained weight after the run."""


def _weights(record: dict) -> str:
    return next(f for f in record["weights"]["files"] if f.endswith(".safetensors"))


def torchrun(lab, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node", "2", "-m", "tunelab.cli", *argv, "--lab", str(lab), "--json"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.parametrize(
    "method",
    [
        {
            "type": "lora",
            "r": 4,
            "alpha": 8,
            "dropout": 0.0,
            "target_modules": ["q_proj", "v_proj"],
        },
        {"type": "full"},
    ],
    ids=["lora", "full"],
)
def test_ddp_on_two_processes_takes_the_single_process_steps(make_extraction_lab, capsys, method):
    lab = make_extraction_lab(training=TRAINING, method=method)
    for command in (["data"], ["baseline"]):
        assert main([command[0], "--lab", str(lab), *command[1:], "--json"]) == 0, command
    capsys.readouterr()
    assert main(["run", "--lab", str(lab), "--name", "one", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)

    done = torchrun(lab, "run", "--name", "two")
    assert done.returncode == 0, done.stderr[-3000:]
    two = json.loads(done.stdout)  # rank 0 alone printed
    assert two["id"] == "r003-two" and two["status"] == "completed"

    # the same examples, the same global normalisation: the same steps and the same model
    losses = [h["loss"] for h in one["training"]["history"]]
    assert [h["loss"] for h in two["training"]["history"]] == pytest.approx(
        losses, rel=LOSS_TOLERANCE
    )
    assert two["training"]["tokens"] == one["training"]["tokens"]
    weights = [
        load_file(lab / ".tunelab/runs" / r["id"] / "weights" / _weights(r)) for r in (one, two)
    ]
    assert weights[0].keys() == weights[1].keys()
    worst = max(float((weights[0][k] - weights[1][k]).abs().max()) for k in weights[0])
    assert worst < WEIGHT_TOLERANCE, worst
    assert two["training"]["processes"] == {
        "world_size": 2,
        "strategy": "ddp",
        "backend": "gloo",
        "devices": ["cpu", "cpu"],
        "sharding": "each global batch of 8 in the single-process order, cut into 2 contiguous "
        "shares of 4 (2 microbatch(es) of 2 per rank)",
    }
    assert one["training"]["processes"]["world_size"] == 1

    # one run, written by rank 0 alone
    store = Store(lab)
    assert [r["id"] for r in store.runs()] == ["r001-zero-shot", "r002-one", "r003-two"]
    started = [e for e in store.events() if e["event"] == "run_started"]
    assert [e["run"] for e in started] == ["r001-zero-shot", "r002-one", "r003-two"]


def test_a_global_batch_the_processes_cannot_share_is_refused_before_a_record(
    make_extraction_lab, capsys
):
    lab = make_extraction_lab(training={**TRAINING, "global_batch": 6})
    for command in (["data"], ["baseline"]):
        assert main([command[0], "--lab", str(lab), *command[1:], "--json"]) == 0, command
    capsys.readouterr()
    done = torchrun(lab, "run", "--name", "odd")
    assert done.returncode != 0
    errors = {json.loads(line)["error"] for line in done.stdout.splitlines() if line}
    assert len(errors) == 1  # every rank refuses the same way, before any record
    assert "must be a multiple of 2 processes × training.microbatch (2)" in errors.pop()
    assert [r["id"] for r in Store(lab).runs()] == ["r001-zero-shot"]
