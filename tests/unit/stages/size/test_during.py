"""What a run holds beyond its steps, in `tunelab size`: `training.keep: best`'s copy of the
trained weights and the validation pass between steps (`training.validate_every`), estimated
and measured."""

from __future__ import annotations

import io

import torch
import yaml
from rich.console import Console

from tunelab.core.spec import FullMethod, load_spec
from tunelab.stages.size import estimate as est
from tunelab.stages.size import measure as sizing
from tunelab.stages.size import ranks
from tunelab.stages.size.during import During, hold_best, section
from tunelab.stages.size.shape import Shape, Trainables
from tunelab.views import size as view

SHAPE = Shape("llama", "causal", 2, 32, 4, 2, 8, 64, 100)
BIG_VOCAB = Shape("llama", "causal", 2, 32, 4, 2, 8, 64, 50_000)
FULL = Trainables(1_000_000, 4_000_000, 1_000_000, 4_000_000, 400_000)
UNITS = ranks.Units(blocks=2, largest_block_bytes=1_200_000, root_bytes=1_600_000)


def test_keep_best_holds_one_copy_of_the_trained_weights_through_every_phase():
    last = est.estimate(SHAPE, FULL, 2, 16, during=During(False, 1))
    best = est.estimate(SHAPE, FULL, 2, 16, during=During(True, 1))
    assert best["components"]["best_weights"] == FULL.trainable_bytes
    assert "best_weights" not in last["components"]
    assert best["peak_bytes"] - last["peak_bytes"] == FULL.trainable_bytes
    assert best["phases"] == last["phases"]  # held through all of them, not a phase of its own
    plain = est.estimate(SHAPE, FULL, 2, 16)
    assert "validation" not in plain["phases"] and "best_weights" not in plain["components"]


def test_a_large_evaluation_batch_makes_the_validation_pass_the_runs_peak():
    """A causal LM's validation pass holds its batch's target logits over the vocabulary:
    at 64 sequences it outweighs a step of 2, and grows with the evaluation batch alone."""
    small = est.estimate(BIG_VOCAB, FULL, 2, 64, targets=32, during=During(False, 2))
    large = est.estimate(BIG_VOCAB, FULL, 2, 64, targets=32, during=During(False, 64))
    assert small["peak_phase"] != "validation"
    assert large["peak_phase"] == "validation"
    v = large["phases"]["validation"]
    assert v >= 64 * 32 * BIG_VOCAB.vocab * 4 * 2  # the logits and their log-softmax at least
    assert large["phases"]["forward_and_loss"] == small["phases"]["forward_and_loss"]
    out = section(During(False, 64), large, {"step_peak_mb": 0.5}, 1.0)
    assert out["validation_is_peak"] and "evaluation.batch_size" in out["advice"]
    assert section(None, large, {}, 0.0) is None


def test_the_validation_pass_runs_without_autocast_in_the_weights_dtype():
    bf16 = est.estimate(SHAPE, FULL, 2, 16, precision="bf16", during=During(False, 8))
    fp32 = est.estimate(SHAPE, FULL, 2, 16, during=During(False, 8))
    assert bf16["phases"]["validation"] == fp32["phases"]["validation"]


def test_each_rank_holds_its_own_copy_or_its_shard_of_it():
    during = During(True, 2)
    ddp = ranks.rank_estimate("ddp", 2, SHAPE, FULL, UNITS, 2, 16, during=during)
    fsdp = ranks.rank_estimate("fsdp", 4, SHAPE, FULL, UNITS, 2, 16, during=during)
    assert ddp["terms"]["best_weights"] == FULL.trainable_bytes
    assert fsdp["terms"]["best_weights_shard"] == FULL.trainable_bytes // 4
    assert set(ddp["described"]) == set(ddp["terms"])
    assert set(fsdp["described"]) == set(fsdp["terms"])
    plain = ranks.rank_estimate("fsdp", 4, SHAPE, FULL, UNITS, 2, 16)
    assert fsdp["peak_bytes"] - plain["peak_bytes"] >= FULL.trainable_bytes // 4


def test_the_spec_says_what_is_held(make_lab):
    lab = make_lab()
    assert During.of(load_spec(lab / "tunelab.yaml")) is None
    spec = yaml.safe_load((lab / "tunelab.yaml").read_text())
    spec["training"] |= {"validate_every": 2, "keep": "best"}
    spec["evaluation"] = {"batch_size": 48}
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(spec))
    during = During.of(load_spec(lab / "tunelab.yaml"))
    assert during == During(True, 48)
    assert During.from_args({"seq_len": 8} | during.as_dict()) == during
    assert During.from_args({"seq_len": 8}) is None


def test_keep_best_copies_what_trains_and_nothing_else():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    model[0].requires_grad_(False)
    kept = hold_best(model, {"keep_best": True})
    assert set(kept) == {"1.weight", "1.bias"}
    assert kept["1.weight"].data_ptr() != model[1].weight.data_ptr()
    assert torch.equal(kept["1.weight"], model[1].weight)
    assert hold_best(model, {"keep_best": False}) is None


def test_the_probe_measures_the_validation_pass_beside_its_estimate(tiny_llama):
    """One probe process on the tiny Llama with a validation batch of 512: the pass raises the
    peak above the steps' own by about what the estimate's validation phase adds (less where
    the pass reuses heap the steps freed: 78-110% in nine probes), and the view says both."""
    args = {
        "model_dir": str(tiny_llama),
        "kind": "causal",
        "seq_len": 64,
        "targets": 32,
        "microbatch": 2,
        "steps": 1,
        "method": {"type": "full"},
    }
    during = During(True, 512)
    r = sizing.run_probe(args | during.as_dict())
    assert r["peak_rss_mb"] > r["step_peak_mb"] and r["validation_loss"] > 0
    shape, tr = sizing.model_facts(tiny_llama, "causal", "float32", FullMethod(), ["a", "b"])
    e = est.estimate(shape, tr, 2, 64, targets=32, during=during)
    assert e["peak_phase"] == "validation"
    step = max(v for k, v in e["phases"].items() if k != "validation")
    estimated = (e["phases"]["validation"] - step) / 2**20
    measured = r["peak_rss_mb"] - r["step_peak_mb"]
    assert 0.5 * estimated <= measured <= 1.25 * estimated, (estimated, measured)
    out = Console(file=io.StringIO(), width=200)
    view._during(section(during, e, r, r["peak_rss_mb"]), out)
    text = " ".join(out.file.getvalue().split())
    assert "keep: best holds a second copy" in text and "evaluation.batch_size 512" in text
    assert "the steps alone" in text and "a smaller evaluation.batch_size" in text
