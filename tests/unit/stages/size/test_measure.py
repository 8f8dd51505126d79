"""`tunelab size`'s measurements: the probe process, the largest-microbatch search and the
advice; run_size end to end (slow)."""

from __future__ import annotations

import io
import json
import subprocess
import tempfile
from pathlib import Path

import pytest
import torch
from rich.console import Console

from tunelab.cli import main
from tunelab.core.lab import open_lab
from tunelab.core.spec import LoraMethod, ModelSpec
from tunelab.modeling.classifier_inputs import Encoded
from tunelab.modeling.model import load_causal
from tunelab.modeling.render import Rendered
from tunelab.stages.size import advice as sizing_advice
from tunelab.stages.size import lengths, probe
from tunelab.stages.size import measure as sizing
from tunelab.stages.size.probe import read_args
from tunelab.views import size as show_preflight

CPU = torch.device("cpu")
LORA_BERT = LoraMethod(r=4, alpha=8, target_modules=["query", "value"])


def test_probe_subprocess_reports_a_peak_above_its_baseline(tiny_bert, tmp_path, monkeypatch):
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(system_tmp))  # the child's temporary folder
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))  # and this process's
    scratch = tmp_path / "lab" / ".tunelab" / "sizing" / "scratch"
    args = {
        "model_dir": str(tiny_bert),
        "kind": "encoder",
        "num_labels": 3,
        "seq_len": 24,
        "microbatch": 4,
        "method": LORA_BERT.model_dump(),
        "max_grad_norm": 1.0,
    }
    seen = []
    real_run = subprocess.run

    def run(cmd, **kwargs):  # the probe's arguments and environment, as it starts
        seen.append((read_args(cmd[-1]), kwargs["env"]))
        return real_run(cmd, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)  # as `core.env.run_child` calls it
    r = sizing.run_probe(args, scratch=scratch)
    assert r["peak_reset"] and 0 < r["rss_framework_mb"] < r["rss_loaded_mb"]
    assert r["peak_rss_mb"] >= r["rss_after_warmup_mb"] > r["rss_loaded_mb"]
    assert r["trainable_params"] < r["params"] and r["tokens_per_step"] == 4 * 24
    # a classifier's run imports sklearn.metrics to score (100 MiB): in the framework here too
    assert r["evaluation_imports"] == ["sklearn.metrics"]
    ((probe, env),) = seen
    assert Path(probe["out"]).parent.parent == scratch  # its result went into the lab ...
    assert Path(env["HF_MODULES_CACHE"]).parent.parent == scratch  # ... and any remote code
    assert list(scratch.iterdir()) == [] and list(system_tmp.iterdir()) == []  # removed after


def test_run_size_gives_every_probe_the_labs_scratch_folder(make_lab, monkeypatch):
    lab = _built(make_lab())
    given = []

    def fake_probe(args, timeout=None, scratch=None):
        given.append(scratch)
        raise RuntimeError("stop after the first probe")

    monkeypatch.setattr(sizing, "run_probe", fake_probe)
    with pytest.raises(RuntimeError, match="stop after the first probe"):
        sizing.run_size(lab)
    assert given == [lab.store.root / "sizing" / "scratch"]


def test_largest_microbatch_by_estimate_respects_the_limit():
    def mb(b):
        return 400 + 3.5 * b

    assert sizing_advice.largest_by_estimate(mb, 500) == 28  # 400 + 3.5 x 28 = 498 <= 500 < 501.5
    assert sizing_advice.largest_by_estimate(mb, 403) == 0
    assert sizing_advice.largest_by_estimate(mb, 1e9, cap=64) == 64


def test_largest_microbatch_is_confirmed_by_measuring_and_stepped_down():
    measured = []

    def fake_probe(args):
        b = args["microbatch"]
        measured.append(b)
        return {"peak_rss_mb": 400 + 4.0 * b, "tokens_per_s": 10.0}  # heavier than estimated

    estimate = lambda b, *a: {"peak_mb": 400 + 3.0 * b}  # noqa: E731
    out = sizing_advice.largest_microbatch(
        {}, estimate, 400.0, 500.0, "cpu", lambda text: None, fake_probe
    )
    # 8% of 500 left for what a run adds over its steps: 460; stepping down aims 10% under it
    assert measured == [20, 13] and out["value"] == 13 and out["measured_mb"] <= 460
    assert out["method"] == "estimate, confirmed by measuring" and out["budget_mb"] == 460
    assert out["budget"].startswith("--memory-limit 500 MiB less 8%")


def test_on_cuda_the_largest_microbatch_is_tried_and_given_its_estimate():
    asked = []

    def fake_probe(args):
        asked.append(args)
        return {
            "max_microbatch": 12,
            "device_free_mb": 80_000.0,
            "headroom_mb": 4_000.0,
            "tried": {8: True, 16: False},
        }

    estimate = lambda b, *a: {"peak_mb": 1000 + 500.0 * b}  # noqa: E731
    out = sizing_advice.largest_microbatch(
        {"microbatch": 2}, estimate, 0.0, None, "cuda", lambda text: None, fake_probe
    )
    assert [a["mode"] for a in asked] == ["max_microbatch"]
    assert out["value"] == 12 and out["estimated_mb"] == 7000.0
    assert out["method"] == "tried, out-of-memory caught" and out["budget_mb"] == 76_000.0
    assert "less 4,000 MiB held back" in out["budget"]


def test_on_cuda_every_try_holds_the_optimizer_state_a_run_holds(tiny_llama, monkeypatch):
    """A run holds AdamW's state through every step after its first; a try without it passed
    microbatch 32 for a full fine-tune on an H200 that the run then could not take."""
    import tunelab.training.step as training_step

    model = load_causal(ModelSpec(path=str(tiny_llama)), tiny_llama, CPU)
    seen, real = [], training_step.train_step

    def train_step(model, optimizer, params, batches, *rest):
        rows = sum(len(b["input_ids"]) for b in batches)
        seen.append((rows, sum(len(s) for s in optimizer.state.values())))
        if rows > 6:
            raise torch.cuda.OutOfMemoryError("planted")
        return real(model, optimizer, params, batches, *rest)

    monkeypatch.setattr(training_step, "train_step", train_step)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (1 << 30, 2 << 30))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    args = {"seq_len": 8, "kind": "causal", "targets": 3, "max_try": 16}
    out = probe.max_microbatch(model, args, CPU)
    assert out["max_microbatch"] == 6 and out["tried"][8] is False and out["tried"][6] is True
    assert out["headroom_mb"] == pytest.approx(1024 * probe.HEADROOM)  # held while trying
    assert seen[0] == (1, 0)  # the first step creates the state ...
    assert all(state > 0 for _, state in seen[1:])  # ... which every try then holds


def test_advice_reaches_the_global_batch():
    a = sizing_advice.advice(16, largest=6, processes=1, tokens_per_s=100.0, seq=10)
    assert (a["microbatch"], a["accumulation"]) == (4, 4)
    assert a["expected_step_s"] == pytest.approx(16 * 10 / 100)
    two = sizing_advice.advice(16, largest=6, processes=2, tokens_per_s=100.0, seq=10)
    assert (two["microbatch"], two["accumulation"], two["processes"]) == (4, 2, 2)
    assert not sizing_advice.advice(16, largest=0, processes=1, tokens_per_s=1.0, seq=10)["fits"]


def test_the_advice_says_at_which_microbatch_its_speed_was_measured():
    """'microbatch 16 ... expect ~2,379 tok/s' gave the speed measured at microbatch 2."""
    import io

    from rich.console import Console

    from tunelab.views.size import _advice

    a = sizing_advice.advice(16, largest=16, processes=1, tokens_per_s=100.0, seq=10, measured_at=2)
    out = io.StringIO()
    _advice({"advice": a, "file": "f"}, Console(file=out, width=300))
    assert (
        "expect ~100 tok/s, 1.60s per step (the speed measured at microbatch 2;" in out.getvalue()
    )
    same = sizing_advice.advice(
        16, largest=16, processes=1, tokens_per_s=1.0, seq=10, measured_at=16
    )
    out = io.StringIO()
    _advice({"advice": same, "file": "f"}, Console(file=out, width=300))
    assert "measured at" not in out.getvalue()


def test_representative_length_is_the_95th_percentile():
    assert lengths.representative_length(list(range(1, 101))) == 96
    with pytest.raises(ValueError):
        lengths.representative_length([])


def test_the_target_tokens_are_what_the_examples_hold_at_most_the_length():
    prompts = [
        Rendered(str(i), [1] * (40 + i), [0] * 40 + [1] * i, 40, 0, None, "", "")
        for i in range(1, 21)
    ]
    m = lengths.measured_lengths(prompts, None, 512)
    assert m["seq_len"]["value"] == 60 and m["target_tokens"]["value"] == 20  # p95, rounded up
    assert m["target_tokens"]["p50"] == 10 and m["target_tokens"]["max"] == 20
    assert lengths.measured_lengths(prompts, 12, 512)["target_tokens"]["value"] == 12
    encoded = [Encoded("a", [1, 2, 3], 0, False)]
    assert lengths.measured_lengths(encoded, None, 512)["target_tokens"] is None


def _built(lab_dir: Path):
    from tunelab.data import build_data

    lab = open_lab(lab_dir)
    build_data(lab.spec, lab.path, lab.store)
    return lab


def _check_record(lab, r: dict) -> None:
    seq = r["seq_len"]
    assert seq["source"].startswith("p95")
    assert seq["value"] == min(seq["p95"], lab.spec.model.max_length)
    assert isinstance(r["error_pct"], float) and r["measured_peak_mb"] > 0
    assert set(r["estimate"]["components_mb"]) >= {
        "weights",
        "gradients",
        "optimizer_state",
        "activations",
        "framework",
    }
    names = [v["name"] for v in r["variants"]]
    assert names == ["plain", "accumulation", "checkpointing", "accumulation + checkpointing"]
    assert all("error_pct" in v and v["step_s"] > 0 for v in r["variants"])
    assert r["gradient_check"]["equal"] and "accumulated global batch" in r["loss_normalisation"]
    assert r["advice"]["fits"]
    a = r["advice"]
    assert a["microbatch"] * a["accumulation"] * a["processes"] == lab.spec.training.global_batch
    out = Console(file=io.StringIO(), width=120)
    show_preflight.size(r, out)
    assert "largest microbatch" in out.file.getvalue()
    saved = json.loads((lab.path / r["file"]).read_text())  # relative to the lab
    assert saved["data_version"] == lab.store.current_data()
    assert any(e["event"] == "size" for e in lab.store.events())


@pytest.mark.slow
def test_size_through_the_cli_on_the_bert_lab(make_lab, capsys):
    lab = _built(make_lab())
    code = main(["size", "--lab", str(lab.path), "--memory-limit", "1500", "--json"])
    r = json.loads(capsys.readouterr().out)
    assert code == 0, r
    _check_record(lab, r)
    assert r["method"] == "lora" and r["allocator"].startswith("glibc defaults")
    big = r["largest_microbatch"]
    assert big["budget"].startswith("--memory-limit 1,500 MiB") and big["value"] >= 1
    assert big["method"] == "estimate, confirmed by measuring" and big["measured_mb"] <= 1380
    # the search's estimate is scaled by the allocator's share the measured step showed
    cal = r["calibration"]
    assert cal["microbatch"] == lab.spec.training.microbatch and cal["factor"] >= 1.0
    assert big["estimated_mb"] >= r["estimate"]["peak_mb"] or big["value"] < cal["microbatch"]


@pytest.mark.slow
def test_run_size_on_the_llama_lab(make_extraction_lab):
    training = {"lr": 5e-3, "global_batch": 4, "microbatch": 2, "budget": {"steps": 3}}
    training |= {"validate_every": 2, "keep": "best"}  # what a run holds beyond its steps
    lab = _built(make_extraction_lab(training=training))
    r = sizing.run_size(lab, microbatch=2)
    _check_record(lab, r)
    during = r["during_training"]
    assert during["keep_best"] and during["validation_batch"] == lab.spec.evaluation.batch_size
    assert during["best_weights_mb"] == r["estimate"]["components_mb"]["best_weights"]  # LoRA: tiny
    assert "validation" in r["estimate"]["phases_mb"]
    assert during["measured_peak_mb"] >= during["measured_step_peak_mb"] > 0
    check = r["gradient_check"]
    assert len(set(check["weights_per_microbatch"])) > 1  # unequal target tokens ...
    assert not check["per_microbatch_mean_equal"]  # ... which a per-microbatch mean gets wrong


def test_a_what_if_is_kept_beside_the_specs_own_measurement_never_in_its_place(make_lab):
    from tunelab.stages.plan.records import latest_size

    lab = _built(make_lab())
    spec_mb = lab.spec.training.microbatch
    assert sizing._what_if(lab.spec, None, spec_mb) is None
    assert sizing._what_if(lab.spec, 512, spec_mb * 4) == {
        "seq_len": 512,
        "microbatch": spec_mb * 4,
    }
    record = {
        "data_version": lab.data_version,
        "spec_hash": sizing.spec_hash(lab.spec),
        "device": "cpu",
        "model": {"path": None, "dtype": "float32", "model_kind": "encoder"},
        "measured_peak_mb": 100.0,
    }
    own = sizing._save(lab.store, record | {"what_if": None}, 24, spec_mb, 90.0, 8)
    assert latest_size(lab.store, "cpu")["file"] == own["file"]
    what_if = {"microbatch": spec_mb * 4}
    bigger = sizing._save(lab.store, record | {"what_if": what_if}, 24, spec_mb * 4, 300.0, 8)
    assert bigger["file"] != own["file"] and bigger["file"].endswith(
        f"-microbatch{spec_mb * 4}.json"
    )
    assert (lab.path / own["file"]).exists()  # the spec's own measurement is still there ...
    assert latest_size(lab.store, "cpu")["file"] == own["file"]  # ... and the plan's
    (lab.path / own["file"]).unlink()
    assert latest_size(lab.store, "cpu")["what_if"] == what_if  # a what-if when no other


def test_the_probe_imports_an_architecture_by_transformers_own_module_name():
    """`deberta-v2` and `gemma3_text` are not module names: the probe had stopped with "No
    module named 'transformers.models.deberta-v2'" (exit 2, as if the user's error)."""
    import importlib

    from tunelab.stages.size.probe import architecture_module

    for kind in ("deberta-v2", "xlm-roberta", "gemma3_text", "qwen3"):
        importlib.import_module(architecture_module(kind))
    assert architecture_module("deberta-v2") == "transformers.models.deberta_v2.modeling_deberta_v2"
