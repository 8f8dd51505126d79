"""LoRA targets checked by name from the safetensors headers, before any weights load: the
refusal names the field and the modules the architecture has, and it agrees with the check on
the built model."""

from __future__ import annotations

import pytest
import torch
import yaml
from peft import LoraConfig, TaskType, get_peft_model

from tunelab.core.lab import open_records_lab
from tunelab.core.spec import LoraMethod, ModelSpec
from tunelab.modeling.model import ModelError, check_targets, load_causal, load_classifier
from tunelab.modeling.targets import (
    TargetError,
    checkpoint_modules,
    require_targets,
    unmatched,
    weight_matrices,
)

CPU = torch.device("cpu")
BERT_LINEAR = ["dense", "key", "query", "value"]
LLAMA_LINEAR = ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]


def lab_with(tmp_path, model_path, method: dict):
    spec = {
        "data": {"sources": [{"type": "jsonl", "path": "d.jsonl"}]},
        "model": {"path": str(model_path)},
        "method": method,
    }
    (tmp_path / "tunelab.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return tmp_path


def test_a_target_the_architecture_lacks_is_refused_with_its_module_names(tmp_path, tiny_bert):
    lab = open_records_lab(lab_with(tmp_path, tiny_bert, {"target_modules": ["q_proj", "value"]}))
    with pytest.raises(TargetError) as err:
        require_targets(lab)
    text = str(err.value)
    line = (tmp_path / "tunelab.yaml").read_text().splitlines().index("  target_modules:") + 1
    assert text.startswith(f"method.target_modules (tunelab.yaml line {line}): 'q_proj' matches ")
    assert "of tiny-bert (bert)" in text and "'value'" not in text.split("matches")[0]
    listed = yaml.safe_load(text.split("are named ")[1].split("]")[0] + "]")
    assert set(BERT_LINEAR) <= set(listed) and "q_proj" not in listed


def test_an_override_target_is_named_as_the_override(tmp_path, tiny_llama):
    lab = open_records_lab(
        lab_with(tmp_path, tiny_llama, {"type": "lora"}), {"method.target_modules": ["query"]}
    )
    with pytest.raises(TargetError, match=r"^method.target_modules=\[query\] \(command line\)"):
        require_targets(lab)
    lab = open_records_lab(
        lab_with(tmp_path, tiny_llama, {"target_modules": ["q_proj"], "modules_to_save": ["heads"]})
    )
    with pytest.raises(TargetError, match=r"method.modules_to_save .*'heads' matches no module"):
        require_targets(lab)
    require_targets(open_records_lab(lab_with(tmp_path, tiny_llama, {"r": 4})))  # the default:
    # every linear layer of the blocks, whatever their names


def test_what_cannot_be_read_without_loading_is_left_to_the_load(tmp_path, tiny_bert):
    require_targets(open_records_lab(lab_with(tmp_path, tiny_bert, {"type": "full"})))
    require_targets(open_records_lab(lab_with(tmp_path, "missing-model", {"r": 4})))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    require_targets(open_records_lab(lab_with(tmp_path, gguf, {"target_modules": ["x"]})))


def test_the_checkpoint_names_and_weight_matrices(tiny_bert, tiny_llama):
    assert set(BERT_LINEAR) <= set(weight_matrices(checkpoint_modules(tiny_bert)))
    llama = checkpoint_modules(tiny_llama)
    assert set(LLAMA_LINEAR) <= set(weight_matrices(llama))
    assert llama["model.layers.0.self_attn.q_proj"][0] > 0 and llama["model.layers.0"] == []
    assert not any(n.endswith("layernorm") for n in weight_matrices(llama))


BERT_PATTERNS = [
    "query",
    "value",
    "dense",
    "attention.self.query",
    "bert.encoder.layer.0.attention.self.query",  # the loaded name; the checkpoint has no bert.
    "word_embeddings",
    "classifier",  # the new head: not in the checkpoint, there once loaded
    "q_proj",
    "nope",
    "self.q",
]
LLAMA_PATTERNS = ["q_proj", "v_proj", "gate_proj", "embed_tokens", "lm_head", "self_attn.o_proj"]
LLAMA_PATTERNS += ["query", "attn.q_proj", "dense"]


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_the_header_check_agrees_with_the_check_on_the_built_model(arch, tiny_bert, tiny_llama):
    path = tiny_bert if arch == "bert" else tiny_llama
    spec = ModelSpec(path=str(path))
    if arch == "bert":
        model, patterns = load_classifier(spec, path, ["a", "b"], CPU), BERT_PATTERNS
    else:
        model, patterns = load_causal(spec, path, CPU), LLAMA_PATTERNS
    names = checkpoint_modules(path)
    refused_early = {p for p in patterns if unmatched([p], names)}
    refused_loaded = set()
    for p in patterns:
        try:
            check_targets(model, LoraMethod(target_modules=[p]))
        except ModelError:
            refused_loaded.add(p)
    assert refused_early == refused_loaded
    assert refused_early == (
        {"q_proj", "nope", "self.q"} if arch == "bert" else {"query", "attn.q_proj", "dense"}
    )


def test_a_module_without_weights_is_refused_early_as_peft_refuses_it(tiny_bert):
    assert unmatched(["dropout"], checkpoint_modules(tiny_bert)) == ["dropout"]
    model = load_classifier(ModelSpec(path=str(tiny_bert)), tiny_bert, ["a", "b"], CPU)
    with pytest.raises(ValueError, match="not supported"):
        get_peft_model(model, LoraConfig(task_type=TaskType.SEQ_CLS, target_modules=["dropout"]))
