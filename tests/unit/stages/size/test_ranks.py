"""`tunelab size --nproc N`: the per-rank estimate's arithmetic, the per-rank split and its
refusal, the advice over N processes, the torchrun command and the per-rank view."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from tunelab.cli import main
from tunelab.core.errors import TunelabError
from tunelab.stages.size import estimate as est
from tunelab.stages.size import processes as procs
from tunelab.stages.size import ranks
from tunelab.stages.size.advice import advice
from tunelab.stages.size.shape import Shape, Trainables
from tunelab.views import size as view

SHAPE = Shape("llama", "causal", 2, 32, 4, 2, 8, 64, 100)
FULL = Trainables(1_000_000, 4_000_000, 1_000_000, 4_000_000, 400_000)
UNITS = ranks.Units(blocks=2, largest_block_bytes=1_200_000, root_bytes=1_600_000)


def rank(strategy: str, n: int, acc: int = 1, tr: Trainables = FULL) -> dict:
    return ranks.rank_estimate(strategy, n, SHAPE, tr, UNITS, 2, 16, acc)


def test_ddp_is_the_one_process_step_plus_a_bucket_copy_of_the_gradients():
    one = est.estimate(SHAPE, FULL, 2, 16)
    for n in (2, 4):
        r = rank("ddp", n)
        assert r["terms"]["ddp_buckets"] == FULL.trainable_bytes
        assert r["peak_bytes"] == one["peak_bytes"] + FULL.trainable_bytes  # not shrunk by N
        assert r["terms"]["weights"] == FULL.weight_bytes
    assert set(r["described"]) == set(r["terms"])


def test_fsdp_shards_shrink_with_n_and_the_gathered_units_do_not():
    two, four = rank("fsdp", 2), rank("fsdp", 4)
    for name, full in [
        ("weights_shard", FULL.weight_bytes),
        ("gradients_shard", FULL.trainable_bytes),
        ("optimizer_state_shard", 2 * FULL.trainable_bytes),
    ]:
        assert two["terms"][name] == full // 2 and four["terms"][name] == full // 4
    for r in (two, four):
        assert r["terms"]["gathered_unit"] == 2 * UNITS.largest_block_bytes  # run + prefetch
        assert r["terms"]["gathered_root"] == UNITS.root_bytes
        assert (
            r["terms"]["activations"]
            == est.estimate(SHAPE, FULL, 2, 16)["components"]["activations"]
        )  # the per-rank microbatch's, unchanged
        assert r["terms"]["unsharded_accumulated_gradients"] == 0 and r["approximate"]
    assert four["peak_bytes"] < two["peak_bytes"] < rank("ddp", 2)["peak_bytes"]
    # the peak: the sharded step's walk plus what is gathered
    shard = est.estimate(
        SHAPE, Trainables(1_000_000, 2_000_000, 1_000_000, 2_000_000, 200_000), 2, 16
    )
    assert two["peak_bytes"] == shard["peak_bytes"] + 2 * 1_200_000 + 1_600_000


def test_fsdp_accumulation_keeps_unsharded_gradients():
    r = rank("fsdp", 2, acc=2)
    assert r["terms"]["unsharded_accumulated_gradients"] == FULL.trainable_bytes


def test_unknown_strategy_is_refused():
    with pytest.raises(TunelabError, match="ddp, fsdp"):
        rank("zero3", 2)


def test_per_rank_split_and_its_refusal():
    assert ranks.per_rank_split(8, 2, 2) == (4, 2)
    assert ranks.per_rank_split(8, 4, 2) == (2, 1)
    with pytest.raises(TunelabError, match="multiple of --nproc"):
        ranks.per_rank_split(6, 4, 1)
    with pytest.raises(TunelabError, match="multiple of --nproc"):
        ranks.per_rank_split(8, 3, 2)


def test_advice_over_processes_reaches_the_global_batch():
    for n in (1, 2, 4):
        a = advice(16, largest=3, processes=n, tokens_per_s=100.0, seq=10)
        assert a["processes"] == n
        assert a["microbatch"] * a["accumulation"] * a["processes"] == 16
        assert a["expected_tokens_per_s"] == 100.0 * n


def test_fsdp_units_of_a_meta_llama(tiny_llama):
    from tunelab.core.spec import LoraMethod
    from tunelab.stages.size.measure import meta_model

    lora = LoraMethod(r=4, alpha=8, target_modules=["q_proj", "v_proj"])
    model = meta_model(tiny_llama, "causal", "float32", lora, [])
    u = ranks.fsdp_units(model)
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    assert u.blocks == model.get_base_model().config.num_hidden_layers
    assert u.root_bytes + u.blocks * u.largest_block_bytes == total  # identical blocks


def test_torchrun_command_and_threads(monkeypatch):
    cmd = procs.torchrun_command(2, "{}")
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
    assert cmd[5:] == ["2", "-m", "tunelab.stages.size.probe", "{}"]
    monkeypatch.setattr(procs.os, "sched_getaffinity", lambda pid: set(range(16)))
    assert procs.omp_threads(4) == 4 and procs.omp_threads(32) == 1


def test_a_gpu_budget_is_the_fullest_devices_free_memory_as_its_rank_read_it(monkeypatch):
    """This process opens no CUDA context for it: one would hold memory on GPU 0 while the
    ranks probe there."""
    import torch

    def no_context(*_args, **_kwargs):
        raise AssertionError("the size command's own process read a GPU")

    monkeypatch.setattr(torch.cuda, "mem_get_info", no_context)
    ranks_read = [{"cuda_free_mb": 79_500.0}, {"cuda_free_mb": 78_900.0}]
    budget, source = procs._budget(None, 2, "cuda", ranks_read)
    assert budget == 78_900.0 and "fullest device" in source
    assert procs._budget(4096.0, 2, "cuda", ranks_read) == (4096.0, "--memory-limit (per rank)")


def test_nproc_that_does_not_divide_the_global_batch_exits_2(make_extraction_lab, capsys):
    lab = make_extraction_lab()  # global batch 4, microbatch 2
    assert main(["data", "--lab", str(lab), "--json"]) == 0
    capsys.readouterr()
    assert main(["size", "--lab", str(lab), "--nproc", "3", "--json"]) == 2
    assert "multiple of --nproc (3)" in json.loads(capsys.readouterr().out)["error"]


def test_the_view_shows_every_rank():
    r = rank("fsdp", 2)
    result = {
        "method": "lora",
        "device": "cpu",
        "precision": "fp32",
        "microbatch": 2,
        "seq_len": {"value": 16, "source": "given", "p50": 10, "p95": 16, "max": 20},
        "allocator": "glibc",
        "processes": {
            "nproc": 2,
            "strategy": "fsdp",
            "omp_num_threads": 1,
            "examples_per_rank": 2,
            "accumulation_per_rank": 1,
            "microbatch": 2,
            "ranks": [
                {"rank": i, "measured_peak_mb": 500.0 + i, "baseline_mb": 400.0, "step_s": 0.1}
                | {"tokens_per_s": 320.0}
                for i in range(2)
            ],
            "max_peak_mb": 501.0,
            "error_pct": -3.0,
            "estimate": {
                "terms_mb": {k: v / 2**20 for k, v in r["terms"].items()},
                "terms": r["described"],
                "peak_phase": r["peak_phase"],
                "peak_mb": 486.0,
                "approximate": True,
            },
        },
        "largest_microbatch": {"value": 2, "budget_mb": 1000, "budget": "x", "method": "y"},
        "advice": advice(4, 2, 2, 320.0, 16),
        "file": "sizing.json",
    }
    out = Console(file=io.StringIO(), width=160)
    view.size(result, out)
    text = out.file.getvalue()
    assert "fsdp × 2 processes" in text and "gathered unit" in text
    assert "500.0" in text and "501.0" in text and "× 2 process(es) = global batch 4" in text
    json.dumps(result)  # the record is plain JSON
    assert Path(result["file"]).name == "sizing.json"


def _fake_torchrun(monkeypatch, rank_results: dict[int, dict], returncode: int = 0) -> list:
    seen = []

    def run(cmd, **kwargs):
        seen.append((cmd, kwargs["env"]))
        out = Path(json.loads(cmd[-1])["out"])
        for r, result in rank_results.items():
            out.with_name(f"{out.name}.rank{r}").write_text(json.dumps(result))

        class Done:
            stderr = "torchrun said something"

        Done.returncode = returncode
        return Done()

    monkeypatch.setattr(subprocess, "run", run)  # as `core.env.run_child` calls it
    return seen


def test_rank_probes_read_every_rank_and_share_the_cores(monkeypatch, tmp_path):
    seen = _fake_torchrun(monkeypatch, {0: {"step_s": 1.0}, 1: {"step_s": 2.0}})
    monkeypatch.setattr(procs.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    r = procs.run_rank_probes({"microbatch": 2}, 2, 10, scratch=tmp_path / "scratch")
    assert [x["step_s"] for x in r["ranks"]] == [1.0, 2.0] and r["omp_num_threads"] == 2
    ((cmd, env),) = seen
    assert env["OMP_NUM_THREADS"] == "2" and "torch.distributed.run" in cmd
    assert list((tmp_path / "scratch").iterdir()) == []  # removed after


def test_a_rank_out_of_memory_is_oom_and_a_missing_rank_fails(monkeypatch, tmp_path):
    from tunelab.stages.size.launch import SizingError

    _fake_torchrun(monkeypatch, {0: {"step_s": 1.0}, 1: {"error": "out of memory", "oom": True}})
    r = procs.run_rank_probes({}, 2, 10, scratch=tmp_path)
    assert r["oom"] and "out of memory" in r["error"]
    _fake_torchrun(monkeypatch, {0: {"step_s": 1.0}}, returncode=1)
    with pytest.raises(SizingError, match="torchrun said something"):
        procs.run_rank_probes({}, 2, 10, scratch=tmp_path)


def test_more_processes_than_cores_is_said_with_what_it_costs(monkeypatch):
    import os

    from tunelab.training import distributed

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert distributed.oversubscribed(2) is None
    said = distributed.oversubscribed(3)
    assert said.startswith("3 processes on 2 cores: the ranks share cores")


def test_fsdp_peak_is_the_whole_model_where_its_weights_outweigh_the_sharded_step():
    """Every rank loads the whole model before it is sharded, and rank 0 evaluates it whole after
    training: a rank's peak is never below the weights, however many processes share them."""
    heavy = Trainables(1_000_000, 400_000_000, 1_000, 4_000, 4_000)  # LoRA on big weights
    r = ranks.rank_estimate("fsdp", 8, SHAPE, heavy, UNITS, 2, 16)
    assert r["terms"]["whole_model"] == heavy.weight_bytes
    assert r["peak_bytes"] == heavy.weight_bytes and r["peak_phase"] == ranks.WHOLE_MODEL
    assert rank("fsdp", 2)["peak_phase"] != ranks.WHOLE_MODEL  # a full fine-tune's step wins


def test_fsdp_advice_names_the_whole_model_when_no_microbatch_fits_for_it():
    section = {
        "estimate": {
            "terms_mb": {"whole_model": 900.0},
            "phases_mb": {},
            "peak_phase": ranks.WHOLE_MODEL,
            "peak_mb": 900.0,
            "approximate": True,
        },
        "largest_microbatch": {"value": 0, "budget_mb": 500.0},
        "ranks": [{"rank": 0, "step_s": 0.1, "tokens_per_s": 10.0}],
        "nproc": 4,
        "tokens_per_s_per_rank": 10.0,
        "max_peak_mb": 400.0,
        "error_pct": 1.0,
    }
    told = procs.processes_record(section, 8, 16)["advice"]
    assert not told["fits"] and "whole model (900.0 MiB" in told["reason"]
    assert "more processes do not help" in told["reason"]
