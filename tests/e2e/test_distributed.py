"""Two processes under torchrun (gloo on CPU) take the steps one process takes.

The lab is generative, so the two ranks' shares of a global batch hold different numbers of
target tokens: the per-token loss must still be normalised by the whole global batch's count.
Dropout is off (LoRA dropout 0; the tiny Llama has none), so the only difference left between
one and two processes is the order of floating-point sums.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from rich.console import Console
from safetensors.torch import load_file
from test_run_states import wait_for_step

from tunelab.cli import main
from tunelab.core.store import Store
from tunelab.views.runs import run as run_view

pytestmark = pytest.mark.slow

TRAINING = {
    "lr": 5e-3,
    "global_batch": 8,
    "microbatch": 2,
    "budget": {"steps": 4},
    "seed": 0,
    "validate_every": 2,  # every rank measures the validation loss, alike
}
LOSS_TOLERANCE = 1e-5
"""Relative, per step (sums in another order)."""
WEIGHT_TOLERANCE = 1e-4
"""Absolute, the largest difference of any trained weight after the run."""


def weights_path(lab, record: dict):
    name = next(f for f in record["weights"]["files"] if f.endswith(".safetensors"))
    return lab / ".tunelab/runs" / record["id"] / "weights" / name


def _worst_rel(one: dict, two: dict) -> float:
    pairs = zip(one["training"]["history"], two["training"]["history"], strict=True)
    return max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in pairs)


def torchrun(lab, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node", "2", "-m", "tunelab.cli", *argv, "--lab", str(lab), "--json"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_processes_take_the_single_process_steps(make_extraction_lab, capsys, strategy):
    """Full fine-tuning (LoRA: the resume tests below, which compare their steps too)."""
    method = {"type": "full"}
    lab = make_extraction_lab(training={**TRAINING, "strategy": strategy}, method=method)
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
    curves = [[p["loss"] for p in r["training"]["validation"]["points"]] for r in (one, two)]
    assert len(curves[0]) == 2 and curves[1] == pytest.approx(curves[0], rel=1e-4)
    weights = [load_file(weights_path(lab, r)) for r in (one, two)]
    assert weights[0].keys() == weights[1].keys()
    worst = max(float((weights[0][k] - weights[1][k]).abs().max()) for k in weights[0])
    assert worst < WEIGHT_TOLERANCE, worst
    ranks = two["training"]["per_rank"]  # unequal shares of target tokens, one sum
    assert len(ranks) == 2 and sum(r["tokens"] for r in ranks) == two["training"]["tokens"]
    assert ranks[0]["tokens"] != ranks[1]["tokens"]
    assert all(r["tokens_per_s"] > 0 and r["peak_memory_mb"] > 0 for r in ranks)
    assert two["training"]["accumulation"] == 2 and one["training"]["per_rank"] is None
    console = Console(record=True, width=200)
    run_view(two, console)
    assert f"2 processes ({strategy}, gloo): rank 0 " in console.export_text()
    processes = two["training"]["processes"]
    assert {k: processes[k] for k in ("world_size", "strategy", "backend", "devices")} == {
        "world_size": 2,
        "strategy": strategy,
        "backend": "gloo",
        "devices": ["cpu", "cpu"],
    }
    assert processes["sharding"] == (
        "each global batch of 8 in the single-process order, cut into 2 contiguous shares of 4 "
        "(2 microbatch(es) of 2 per rank)"
    )
    if strategy == "fsdp":  # gradients summed; the loss divided by the whole batch's count
        assert processes["loss_normalisation"].startswith("the whole global batch's count / 1")
        assert processes["fsdp"]["units"] == "2 LlamaDecoderLayer + the root"
    else:  # DDP averages the ranks' gradients
        assert processes["loss_normalisation"].startswith("the whole global batch's count / 2")
        assert processes["fsdp"] is None
    print(f"{strategy} {method['type']}: loss rel {_worst_rel(one, two):.1e}, weights {worst:.1e}")
    assert one["training"]["processes"]["world_size"] == 1

    # one run, written by rank 0 alone
    store = Store(lab)
    assert [r["id"] for r in store.runs()] == ["r001-zero-shot", "r002-one", "r003-two"]
    started = [e for e in store.events() if e["event"] == "run_started"]
    assert [e["run"] for e in started] == ["r001-zero-shot", "r002-one", "r003-two"]


def test_what_the_processes_cannot_share_is_refused_before_a_record(
    make_extraction_lab, capsys, monkeypatch
):
    """Each rank refuses the same way, before any record, so torchrun's processes are not
    started for this (the refusals come before the process group)."""
    lab = make_extraction_lab(training={**TRAINING, "global_batch": 6})
    for command in (["data"], ["baseline"]):
        assert main([command[0], "--lab", str(lab), *command[1:], "--json"]) == 0, command
    capsys.readouterr()
    monkeypatch.setenv("WORLD_SIZE", "2")
    for rank in ("0", "1"):  # rank 0 answers on stdout; rank 1 on stderr, marked, so that
        monkeypatch.setenv("RANK", rank)  # `--json` reads one object
        monkeypatch.setenv("LOCAL_RANK", rank)

        def said(rank=rank) -> str:
            out, err = capsys.readouterr()
            if rank == "0":
                assert err == ""
                return json.loads(out)["error"]
            assert out == "" and err.startswith("error (")
            return err

        assert main(["run", "--lab", str(lab), "--name", "odd", "--json"]) == 2
        assert "must be a multiple of 2 processes × training.microbatch (2)" in said()
        assert main(["check", "--lab", str(lab), "--json"]) == 2  # one process only
        assert "not in torchrun's 2" in said()
    assert [r["id"] for r in Store(lab).runs()] == ["r001-zero-shot"]


LONG = {**TRAINING, "budget": {"steps": 60}}
"""Long enough to stop in the middle; no periodic checkpoints (one is saved on the stop)."""
LORA = {"type": "lora", "r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}


def start_torchrun(lab, *argv: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node", "2", "-m", "tunelab.cli", *argv, "--lab", str(lab), "--json"]
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own process group: torchrun and both ranks
    )


def stop_at_a_step(lab, strategy: str, group: bool) -> tuple[dict, dict]:
    """A 2-process run SIGTERMed after a few steps: its record and its checkpoint's loop state.
    `group`: to every process (as a scheduler does to a job: each rank gets it twice, directly
    and passed on by torchrun); else to torchrun alone, which passes it on to both ranks."""
    proc = start_torchrun(lab, "run", "--name", "stopped", f"training.strategy={strategy}")
    run_dir = lab / ".tunelab/runs/r002-stopped"
    wait_for_step(run_dir, 3, proc, timeout=300)
    if group:
        os.killpg(proc.pid, signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0, out
    record = json.loads((run_dir / "record.json").read_text())
    assert record["status"] == "interrupted" and record["checkpoint"] == "checkpoint", err[-3000:]
    state = json.loads((run_dir / "checkpoint/state.json").read_text())
    assert 3 <= state["step"] < 60
    assert state["written_by"] == {"world_size": 2, "strategy": strategy}
    shards = sorted(p.name for p in (run_dir / "checkpoint").iterdir())
    assert shards == [
        ".metadata",
        "__0_0.distcp",
        "__1_0.distcp",
        "rng-0.pt",
        "rng-1.pt",
        "state.json",
    ]
    assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith("heartbeat")) == [
        "heartbeat.json"  # rank 0 alone writes
    ]
    return record, state


def straight_run(lab, capsys) -> dict:
    assert main(["run", "--lab", str(lab), "--name", "straight", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def assert_same_run(lab, resumed: dict, straight: dict) -> None:
    losses = [h["loss"] for h in straight["training"]["history"]]
    assert [h["loss"] for h in resumed["training"]["history"]] == pytest.approx(
        losses, rel=RESUMED_LOSS_TOLERANCE
    )
    assert resumed["training"]["tokens"] == straight["training"]["tokens"]
    assert resumed["metrics"] == straight["metrics"]
    trained = [load_file(weights_path(lab, r)) for r in (straight, resumed)]
    assert trained[0].keys() == trained[1].keys()
    worst = max(float((trained[0][k] - trained[1][k]).abs().max()) for k in trained[0])
    assert worst < WEIGHT_TOLERANCE, worst
    print(f"resumed: loss rel {_worst_rel(straight, resumed):.1e}, weights {worst:.1e}")


RESUMED_LOSS_TOLERANCE = 1e-4
"""Relative, per step, over 60 steps: one and two processes sum in another order, and the
differences grow a little with the steps."""


def test_sigterm_to_the_group_stops_both_ranks_and_resume_on_two_ends_like_one_process(
    make_extraction_lab, capsys
):
    lab = make_extraction_lab(training=LONG, method=LORA)
    assert main(["data", "--lab", str(lab), "--json"]) == 0
    assert main(["baseline", "--lab", str(lab), "--json"]) == 0
    capsys.readouterr()
    stop_at_a_step(lab, "ddp", group=True)

    done = torchrun(lab, "resume", "r002-stopped")
    assert done.returncode == 0, done.stderr[-3000:]
    resumed = json.loads(done.stdout)
    assert resumed["status"] == "completed"
    assert [r["world_size"] for r in resumed["resumed"]] == [2]
    assert_same_run(lab, resumed, straight_run(lab, capsys))


# torch's checkpoint reader warns that it assumes one process: the resume says so itself
@pytest.mark.filterwarnings("error:torch.distributed is disabled:UserWarning")
def test_a_two_process_fsdp_checkpoint_resumes_on_one_process(make_extraction_lab, capsys):
    lab = make_extraction_lab(training=LONG, method=LORA)
    assert main(["data", "--lab", str(lab), "--json"]) == 0
    assert main(["baseline", "--lab", str(lab), "--json"]) == 0
    capsys.readouterr()
    stop_at_a_step(lab, "fsdp", group=False)

    assert main(["resume", "--lab", str(lab), "r002-stopped", "--json"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["status"] == "completed"
    (again,) = resumed["resumed"]
    assert again["world_size"] == 1
    assert again["checkpoint_written_by"] == {"world_size": 2, "strategy": "fsdp"}
    assert resumed["training"]["processes"]["world_size"] == 1
    assert_same_run(lab, resumed, straight_run(lab, capsys))
