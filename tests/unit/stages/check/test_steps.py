"""`tunelab check` on the tiny labs: it passes clean wiring and fails, by name, broken wiring."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tunelab.core.lab import open_lab
from tunelab.core.spec import parse_overrides
from tunelab.data import build_data
from tunelab.modeling import model as model_lib
from tunelab.stages.check import environment as preflight_environment
from tunelab.stages.check import reload as preflight_reload
from tunelab.stages.check.environment import check_backend
from tunelab.stages.check.record import check_status, latest_check, wiring
from tunelab.stages.check.reload import compare_outputs, loss_and_logits
from tunelab.stages.check.steps import run_check
from tunelab.training.step import summed_loss

NAMES = [
    "versions",
    "backend",
    "render",
    "targets",
    "trainable_set",
    "padding",
    "train_loop",
    "update",
    "loss",
    "evaluation",
    "reload",
]
EMBEDDING = "base_model.model.bert.embeddings.word_embeddings.weight"
HEAD = "base_model.model.classifier.modules_to_save.default.weight"


def ready(path, *overrides: str):
    lab = open_lab(path, parse_overrides(list(overrides)))
    build_data(lab.spec, lab.path, lab.store)
    return lab


def by_name(result: dict) -> dict:
    return {i["name"]: i for i in result["items"]}


@pytest.fixture
def spy_subprocess(monkeypatch):
    """Record every command the check starts, and still run it."""
    calls = []
    real = subprocess.run

    def run(cmd, *args, **kwargs):
        calls.append(cmd)
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)  # as `core.env.run_child` calls it
    return calls


def tamper(monkeypatch, change):
    """The seam: `model.apply_method` as the check calls it, then `change` on its result."""
    real = model_lib.apply_method

    def apply(*args, **kwargs):
        model, report = real(*args, **kwargs)
        change(dict(model.named_parameters()), model)
        return model, report

    monkeypatch.setattr(model_lib, "apply_method", apply)


def test_clean_classification_lab_passes_and_reloads_in_a_fresh_process(make_lab, spy_subprocess):
    lab = ready(make_lab())
    result = run_check(lab)
    items = by_name(result)
    assert [i["name"] for i in result["items"]] == NAMES
    assert result["passed"], [i for i in result["items"] if not i["passed"]]
    assert items["targets"]["matched"] == {"query": 2, "value": 2}
    assert HEAD in result["trainable"]["names"] and EMBEDDING not in result["trainable"]["names"]
    # LoRA A gets its first gradient at step 2, once B has left zero
    late = items["update"]["changed_at_step_2"]
    assert late and all(".lora_A." in n for n in late)
    assert items["loss"]["after"] < items["loss"]["before"]
    measured = items["backend"]["precision"]  # what precision auto would choose, and why
    assert measured["choice"] in ("fp32", "bf16") and measured["fp32_gflops"] > 0
    assert f"auto would choose {measured['choice']}" in items["backend"]["detail"]
    assert result["slice"] == {"train": 16, "validation": 4}

    reload = items["reload"]
    (cmd,) = [c for c in spy_subprocess if "tunelab.stages.check.reload" in c]
    assert cmd[1:3] == ["-m", "tunelab.stages.check.reload"]
    assert reload["process"]["pid"] != os.getpid() == reload["process"]["parent_pid"]
    assert reload["comparison"]["tolerance"] == 0.0  # CPU, float32: identical
    assert reload["comparison"]["max_abs_diff"] == {"logits": 0.0}
    assert reload["comparison"]["predictions_differ"] == []

    # every item carries its step's seconds; the record gives each step's once, in order
    assert all(isinstance(i["seconds"], float) and i["seconds"] >= 0 for i in result["items"])
    assert {i["name"]: i["step"] for i in result["items"]}["loss"] == "train_loop"
    assert list(result["timing"]) == [*NAMES[:7], "evaluation", "reload"]
    assert result["timing"]["reload"] == reload["seconds"]
    # each step's seconds and the total are rounded to 0.01 apiece: the sum may pass the total
    # by half a hundredth per rounding, no more
    rounding = 0.005 * (len(result["timing"]) + 1)
    assert sum(result["timing"].values()) <= result["seconds"] + rounding
    parts = reload["process"]["seconds"]
    assert set(parts) == {"save", "process", "load", "outputs"}
    assert parts["load"] + parts["outputs"] <= parts["process"] <= reload["seconds"]

    assert latest_check(lab.store, lab.spec, result["data_version"]) == result
    assert result["wiring"] == wiring(lab.spec)  # what the key hashes, kept to name changes
    assert (lab.path / result["file"]).exists()
    assert lab.store.events()[-1]["event"] == "check"
    assert check_status(lab, result["data_version"])["warning"] is None


def test_clean_extraction_lab_passes(make_extraction_lab):
    lab = ready(make_extraction_lab())
    result = run_check(lab)
    assert result["passed"], [i for i in result["items"] if not i["passed"]]
    items = by_name(result)
    assert items["targets"]["matched"] == {"q_proj": 2, "v_proj": 2}
    assert items["train_loop"]["losses"] and "2 accumulation" in items["train_loop"]["detail"]
    diff = items["reload"]["comparison"]["max_abs_diff"]
    assert diff == {"target_argmax": 0, "target_logprob": 0.0}


def test_a_lora_target_that_matches_nothing_fails_and_lists_the_modules(make_lab):
    lab = ready(make_lab(), "method.target_modules=[nope]")
    result = run_check(lab)
    items = by_name(result)
    assert not result["passed"] and result["failed"] == ["targets"]
    assert result["skipped"] == NAMES[NAMES.index("targets") + 1 :]
    assert "nope" in items["targets"]["detail"] and "query" in items["targets"]["detail"]
    assert {"query", "value", "word_embeddings"} <= set(items["targets"]["modules"])
    assert all(items[n].get("skipped") for n in NAMES[NAMES.index("targets") + 1 :])
    assert "FAILED" in check_status(lab, result["data_version"])["warning"]


def test_a_frozen_parameter_left_trainable_fails_by_name(make_lab, monkeypatch, no_reload):
    tamper(monkeypatch, lambda params, _: params[EMBEDDING].requires_grad_(True))
    result = run_check(ready(make_lab()))
    items = by_name(result)
    assert not result["passed"]
    assert items["trainable_set"]["unexpected"] == [EMBEDDING]
    assert items["update"]["frozen_changed"] == [EMBEDDING]
    assert EMBEDDING in items["update"]["detail"]


def test_a_frozen_parameter_changed_in_place_fails_by_name(make_lab, monkeypatch, no_reload):
    layer_norm = "base_model.model.bert.embeddings.LayerNorm.weight"

    def drift(params, model):
        def bump(*_):
            with torch.no_grad():
                params[layer_norm].add_(1e-3)

        model.base_model.model.bert.embeddings.register_forward_pre_hook(bump)

    tamper(monkeypatch, drift)
    items = by_name(run_check(ready(make_lab())))
    assert items["trainable_set"]["passed"]  # requires_grad is as the method says ...
    assert items["update"]["frozen_changed"] == [layer_norm]  # ... yet the tensor moved
    assert layer_norm in items["update"]["detail"]


def test_a_trainable_parameter_whose_gradient_is_cut_fails_by_name(
    make_lab, monkeypatch, no_reload
):
    tamper(monkeypatch, lambda params, _: params[HEAD].register_hook(lambda g: g * 0))
    # weight decay moves a zero-gradient tensor; the check is not fooled by it
    result = run_check(ready(make_lab(), "training.weight_decay=0.1"))
    update = by_name(result)["update"]
    assert not update["passed"]
    assert update["no_gradient"] == [HEAD]
    assert HEAD in update["detail"] and "no gradient" in update["detail"]


def test_a_loss_that_does_not_go_down_fails_the_loss_item(make_lab, no_reload):
    # an lr far below float32's resolution: the two steps leave the loss where it was
    items = by_name(run_check(ready(make_lab(), "training.lr=1e-30")))
    assert items["train_loop"]["passed"]  # the loop runs ...
    assert not items["loss"]["passed"]  # ... but the loss on its batch does not go down
    loss = items["loss"]["detail"]  # it said "lr too high" of an lr of 1e-30
    assert "did not move" in loss and "lr too low" in loss and "too high" not in loss
    assert items["loss"]["after"] >= items["loss"]["before"]
    update = items["update"]
    assert not update["passed"] and len(update["unchanged"]) > 3
    # every LoRA A matrix was named in the line, a screenful: a count and three of them
    assert f"{len(update['unchanged'])} tensors, e.g. " in update["detail"]
    assert update["unchanged"][3] not in update["detail"]


def test_loss_and_logits_takes_one_forward_pass_and_matches_two():
    class Toy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(10, 3, _weight=torch.arange(30.0).reshape(10, 3))
            self.calls = 0

        def forward(self, input_ids, attention_mask):
            self.calls += 1
            return SimpleNamespace(logits=self.emb(input_ids).sum(1))

    model = Toy()
    batch = {
        "input_ids": torch.tensor([[1, 2], [3, 4]]),
        "attention_mask": torch.ones(2, 2, dtype=torch.long),
        "labels": torch.tensor([0, 2]),
    }
    loss, logits = loss_and_logits(model, batch)
    assert model.calls == 1 and not model._forward_hooks  # one pass, the hook removed
    assert torch.equal(loss, summed_loss(model, batch))
    assert torch.equal(logits, model(batch["input_ids"], batch["attention_mask"]).logits)


def test_outputs_compare_exactly_on_cpu_and_within_tolerance_elsewhere():
    mine = {"loss": 1.0, "predictions": [{"id": "a", "predicted": "x"}]}
    tensors = {"logits": torch.tensor([1.0, 2.0])}
    nudged = {"logits": torch.tensor([1.0, 2.0 + 1e-6])}
    assert compare_outputs(mine, tensors, mine, tensors, 0.0)[0]
    assert not compare_outputs(mine, tensors, mine, nudged, 0.0)[0]
    assert compare_outputs(mine, tensors, mine, nudged, 1e-4)[0]
    other = {"loss": 1.0, "predictions": [{"id": "a", "predicted": "y"}]}
    ok, diff = compare_outputs(mine, tensors, other, tensors, 0.0)
    assert not ok and diff["predictions_differ"] == ["a"]


def test_a_reload_that_differs_names_a_users_mkl_mode_without_strict(monkeypatch):
    """MKL's AVX2 path differs between processes unless its reproducibility is strict
    (bench/README.md): a user's own MKL_CBWR without STRICT is named, with what to do."""
    monkeypatch.setenv("MKL_CBWR", "AUTO")
    assert "MKL_CBWR=AUTO is set without STRICT" in preflight_reload.blas_hint()
    assert "unset it" in preflight_reload.blas_hint()
    for strict in ("AUTO,STRICT", "avx2,strict"):
        monkeypatch.setenv("MKL_CBWR", strict)
        assert preflight_reload.blas_hint() == ""
    monkeypatch.delenv("MKL_CBWR")
    assert preflight_reload.blas_hint() == ""


def test_backend_fails_what_the_device_cannot_do_and_warns_on_slow_paths(make_lab):
    spec = open_lab(make_lab(), parse_overrides(["training.precision=bf16"])).spec
    ok = {"device": "cpu", "float32": "ok", "bfloat16": "ok", "float16": "ok"}
    probe = ok | {"bf16_autocast": "RuntimeError: no", "bf16_native": False}
    failed = check_backend(spec, torch.device("cpu"), probe | {"warnings": [], "mps_available": 0})
    assert not failed["passed"] and "bf16" in failed["detail"]
    emulated = ok | {"bf16_autocast": "ok", "bf16_native": False, "mps_available": False}
    warned = check_backend(spec, torch.device("cpu"), emulated | {"warnings": []})
    assert warned["passed"] and "emulated" in warned["detail"]


def test_requirements_that_cannot_be_read_are_not_checked_never_passed(monkeypatch):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(preflight_environment.metadata, "requires", missing)
    versions = preflight_environment.check_versions()
    assert versions["not_checked"] and versions["passed"] is None
    assert versions["detail"].startswith("not checked")


def test_the_loss_item_tells_a_rise_from_a_standstill():
    from tunelab.stages.check.update import loss_item

    assert "went up" in loss_item(0.5, 0.9, [0.5, 0.7], 8, 16)["detail"]
    assert "(lr too high?)" in loss_item(0.5, 0.9, [0.5, 0.7], 8, 16)["detail"]
    assert "did not move" in loss_item(0.5, 0.5, [0.5, 0.5], 8, 16)["detail"]
    assert loss_item(0.5, 0.4, [0.5, 0.45], 8, 16)["passed"]


def test_the_slice_takes_every_category_in_turn():
    """The first 16 train rows in id order were all `business/...` (or all of the `code`
    source before `prose`): the slice checked a classifier on one label."""
    from tunelab.stages.check.steps import spread

    ids = ["a0", "a1", "a2", "b0", "b1", "c0"]
    rows = [{"id": i, "label": i[0]} for i in ids]
    assert [r["id"] for r in spread(rows, 4)] == ["a0", "b0", "c0", "a1"]
    assert len(spread(rows, 99)) == len(rows)
    sources = [
        {"id": f"{s}{i}", "label": "", "source": s} for s in ("code", "prose") for i in range(9)
    ]
    assert [r["source"] for r in spread(sources, 4)] == ["code", "prose", "code", "prose"]


def test_a_decoder_classifier_pools_no_padding_whatever_pad_its_tokenizer_names(
    make_lab, tiny_llama, tmp_path, monkeypatch
):
    """A tokenizer whose pad token is not the config's pad_token_id had a decoder's classifier
    pool a padding position (it reads its last token that is not the config's pad), so every
    prediction depended on its batch, and every item passed. The loader now gives the config
    the id batches are padded with, and the `padding` item fails where it is not."""
    import json
    import shutil

    base = Path(shutil.copytree(tiny_llama, tmp_path / "llama-pad"))
    config = json.loads((base / "tokenizer_config.json").read_text())
    (base / "tokenizer_config.json").write_text(json.dumps(config | {"pad_token": "the"}))
    method = {"type": "lora", "r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    lab = ready(
        make_lab(),
        f"model.path={base}",
        f"method={json.dumps(method | {'modules_to_save': ['score']})}",
    )
    items = by_name(run_check(lab))
    assert items["padding"]["passed"], items["padding"]
    pad = items["padding"]["detail"].rsplit("× token ", 1)[1]
    assert pad != "2" and "apart and" in items["padding"]["detail"]  # the tokenizer's own pad

    real = model_lib.load_classifier

    def as_before(*args, **kwargs):  # the config's pad_token_id left as the checkpoint had it
        model = real(*args, **kwargs)
        model.config.pad_token_id = 2
        return model

    monkeypatch.setattr(model_lib, "load_classifier", as_before)
    padding = by_name(run_check(lab))["padding"]
    assert not padding["passed"] and padding["gap"] > padding["allowed"]
    assert (
        f"the tokenizer's pad id {pad}, but the model's config says pad_token_id 2"
        in (padding["detail"])
    )
