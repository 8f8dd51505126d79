"""Replicate groups: the seeds each replicate trains, and a failed seed kept in the group."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest
import torch

from tunelab.core.errors import Interrupted, TunelabError
from tunelab.core.lab import Lab
from tunelab.core.replicates import replicate_seeds
from tunelab.core.spec import validate_spec
from tunelab.core.store import Store, read_json
from tunelab.stages.run import replicates

SPEC = {
    "hypothesis": {"behaviour": "b", "metric": "accuracy", "min_effect": 0.02},
    "guardrails": [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}],
    "data": {"sources": [{"type": "jsonl", "path": "d"}]},
    "model": {"path": "m"},
    "training": {"seed": 7},
}


def fake_lab(tmp_path: Path) -> Lab:
    return Lab(tmp_path, validate_spec(SPEC), Store(tmp_path), torch.device("cpu"), data="v1")


def fake_run(fail_at: set[int], interrupt_at: set[int] = frozenset(), error="the GPU caught fire"):
    """A stand-in for run_variant: opens a run for the replicate, then completes, fails or is
    interrupted as told by its index."""

    def run(lab, name, console, replicate=None, **_):
        run_id, _ = lab.store.new_run(name)
        record = {
            "id": run_id,
            "kind": "variant",
            "status": "running",
            "data_version": "v1",
            "replicate": replicate,
            "spec": lab.spec.to_dict(),
            "metrics": {"n": 3, "accuracy": 0.5 + replicate["index"] / 10},
            "training": {"seconds": 1.0},
        }
        lab.store.write_record(run_id, record)
        checkpoint = lab.store.run_dir(run_id) / "checkpoint"  # whole: `resume` goes on from it
        checkpoint.mkdir()
        (checkpoint / "state.json").write_text("{}")
        if replicate["index"] in interrupt_at:
            raise Interrupted("SIGINT", "stopped")
        if replicate["index"] in fail_at:
            raise RuntimeError(error)
        return {**record, "status": "completed"}

    return run


def test_each_replicate_trains_its_own_seed_and_a_failure_stays_in_the_group(tmp_path, monkeypatch):
    monkeypatch.setattr(replicates, "run_variant", fake_run(fail_at={1}))
    group = replicates.run_replicates(fake_lab(tmp_path), 3, "lora")
    assert group["seeds"] == replicate_seeds(7, 3) and group["seeds"][0] == 7
    assert [m["status"] for m in group["members"]] == ["completed", "failed", "completed"]
    assert "the GPU caught fire" in group["members"][1]["error"]
    assert group["members"][1]["run"] == "r002-lora-s1"  # the failed run is named, kept
    assert group["finished"] == 2 and [r["id"] for r in group["runs"]] == [
        "r001-lora",
        "r003-lora-s2",
    ]
    assert group["summary"]["accuracy"]["mean"] == pytest.approx(0.6)
    stored = read_json(tmp_path / ".tunelab" / "groups" / f"{group['id']}.json")
    assert stored["members"] == group["members"]


def test_a_failed_seeds_error_is_printed_as_written_brackets_and_all(tmp_path, monkeypatch):
    """gloo's errors name their source as `[/__w/.../pair.cc:152]`, which rich read as a closing
    tag: printing the failed seed crashed the command as an internal error."""
    import io

    from rich.console import Console

    from tunelab.views.runs import replicates as view

    said = "Gloo connectFullMesh failed with [/__w/pytorch/gloo/tcp/pair.cc:152] refused"
    monkeypatch.setattr(replicates, "run_variant", fake_run(fail_at={1}, error=said))
    out = io.StringIO()
    console = Console(file=out, width=300)
    group = replicates.run_replicates(fake_lab(tmp_path), 2, "lora", console)
    view(group | {"runs": []}, console)  # the group as `run --seeds` prints it at the end
    assert out.getvalue().count("[/__w/pytorch/gloo/tcp/pair.cc:152]") == 2


def test_an_interrupted_replicate_stops_the_group_and_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(replicates, "run_variant", fake_run(set(), interrupt_at={1}))
    with pytest.raises(Interrupted) as err:
        replicates.run_replicates(fake_lab(tmp_path), 3, "lora")
    assert err.value.outcome.startswith("stopped Group g001 stopped at seed 2 of 3: the same ")
    assert "`tunelab run --seeds 3` again, after that resume, counts the seeds" in err.value.outcome
    (path,) = (tmp_path / ".tunelab" / "groups").glob("g*.json")
    stored = read_json(path)
    assert [m["status"] for m in stored["members"]] == ["completed", "interrupted"]
    assert stored["finished"] == 1
    # run again before that resume: the interrupted seed is not trained a second time
    store = Store(tmp_path)
    cut = store.read_record("r002-lora-s1") | {"status": "interrupted"}
    store.write_record("r002-lora-s1", cut)
    with pytest.raises(TunelabError, match=r"begun and interrupted: seed \d+ by r002-lora-s1"):
        replicates.run_replicates(fake_lab(tmp_path), 3, "lora")
    store.write_record("r002-lora-s1", cut | {"status": "completed"})  # resumed, completed
    store.write_record("r001-lora", store.read_record("r001-lora") | {"status": "completed"})
    group = replicates.run_replicates(fake_lab(tmp_path), 3, "lora")
    assert [m["trained"] for m in group["members"]] == [False, False, True]


def test_under_torchrun_another_rank_trains_each_seed_with_rank_0_and_writes_nothing(
    tmp_path, monkeypatch
):
    """`run --seeds 2` under torchrun: rank 1 read its run's id from a record only rank 0 has
    (`KeyError: 'id'`), wrote groups of its own, and left rank 0 waiting in the next seed."""
    calls = []

    def follow(lab, name, console, replicate=None, **_):
        calls.append((name, lab.spec.training.seed, replicate["base_seed"]))
        return {"rank": 1, "training": {"steps": 2, "tokens": 10}}

    monkeypatch.setattr(replicates, "run_variant", follow)
    monkeypatch.setenv("RANK", "1")
    lab = fake_lab(tmp_path)
    have = {replicate_seeds(7, 3)[1]: "r001-lora-s1"}  # a seed rank 0 counts, not trains
    monkeypatch.setattr(replicates, "trained_already", lambda lab, seeds: have)
    result = replicates.run_replicates(lab, 3, "lora")
    seeds = replicate_seeds(7, 3)
    assert calls == [("lora", seeds[0], 7), ("lora-s2", seeds[2], 7)]  # rank 0's order
    assert result["rank"] == 1 and len(result["seeds"]) == 2
    assert not (tmp_path / ".tunelab" / "groups").exists() and lab.store.events() == []


def test_derived_seeds_are_stable_distinct_and_start_with_the_spec_seed():
    seeds = replicate_seeds(0, 5)
    assert seeds[0] == 0 and len(set(seeds)) == 5 and seeds == replicate_seeds(0, 5)
    assert replicate_seeds(1, 2)[1] not in seeds  # another base seed draws other seeds


def test_the_summary_spreads_metrics_not_the_counts_of_the_validation_data():
    """A pretrain group read `bytes 108600.0 ± 0.0, tokens 49100.0 ± 0.0` as if they were
    metrics."""
    runs = [
        {"metrics": {"bits_per_byte": b, "n": 12, "bytes": 108600, "tokens": 49100}}
        for b in (3.40, 3.39)
    ]
    assert set(replicates.summary(runs)) == {"bits_per_byte"}


def test_a_plain_run_finds_the_interrupted_run_that_began_its_seed(tmp_path, monkeypatch):
    """`noise`, `run --seeds` and `ablate` refuse a seed an interrupted run began; a plain `run`
    trains it anew, and names that run and its resume first."""
    monkeypatch.setattr(replicates, "run_variant", fake_run(set(), interrupt_at={0}))
    with pytest.raises(Interrupted):
        replicates.run_replicates(fake_lab(tmp_path), 2, "lora")
    store = Store(tmp_path)
    assert replicates.interrupted_with(fake_lab(tmp_path), 7) is None  # running: not stopped yet
    store.write_record("r001-lora", store.read_record("r001-lora") | {"status": "interrupted"})
    assert replicates.interrupted_with(fake_lab(tmp_path), 7) == "r001-lora"
    assert replicates.interrupted_with(fake_lab(tmp_path), 8) is None  # another seed
    # killed (-9): recorded as running by a process that is gone, so lost, and resumable too
    # (it had been trained again beside itself by `noise`, without a word)
    gone = {"host": socket.gethostname(), "pid": 2**22 + 1}  # above Linux's largest pid
    store.write_record(
        "r001-lora", store.read_record("r001-lora") | {"status": "running", "process": gone}
    )
    assert store.read_record("r001-lora")["status"] == "running"
    assert replicates.interrupted_with(fake_lab(tmp_path), 7) == "r001-lora"
    # nothing to resume from: `resume` would refuse it, so its seed is trained anew
    shutil.rmtree(store.run_dir("r001-lora") / "checkpoint")
    assert replicates.interrupted_with(fake_lab(tmp_path), 7) is None
