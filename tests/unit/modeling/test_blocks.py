"""The transformer blocks (FSDP's units, size's per-block estimate) and the linear layers in
them (a LoRA's default targets)."""

from __future__ import annotations

import torch
from peft import TaskType
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

from tunelab.core.spec import LoraMethod, ModelSpec
from tunelab.modeling.blocks import block_linears, blocks
from tunelab.modeling.model import BLOCK_LINEARS, apply_method, load_classifier


def test_the_blocks_are_the_classes_transformers_keeps_whole(tiny_llama, tiny_bert):
    llama = AutoModelForCausalLM.from_pretrained(tiny_llama)
    assert [type(b).__name__ for b in blocks(llama)] == ["LlamaDecoderLayer"] * 2
    # a classifier: every encoder layer is a unit (and whatever else transformers keeps whole)
    bert = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=3)
    units = blocks(bert)
    assert all(any(layer is u for u in units) for layer in bert.bert.encoder.layer)
    assert not any(u is bert for u in units)  # the root is not a block (FSDP shards it last)


def test_without_named_blocks_the_longest_list_of_one_module_type_is_taken():
    model = torch.nn.Sequential(
        torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)]),
        torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.Linear(2, 2)]),
    )
    assert blocks(model) == list(model[0])


def test_left_out_targets_adapt_every_linear_layer_of_the_blocks_only(tiny_bert):
    model = load_classifier(
        ModelSpec(path=str(tiny_bert)), tiny_bert, ["a", "b"], torch.device("cpu")
    )
    inside = block_linears(model)
    _, report = apply_method(model, LoraMethod(r=2), TaskType.SEQ_CLS)
    assert report["target_modules"] == {BLOCK_LINEARS: len(inside)}
    assert sorted(report["adapted_modules"]) == sorted(inside)
    suffixes = {n.rsplit(".", 1)[-1] for n in inside}
    assert {"query", "key", "value", "dense"} <= suffixes  # attention and MLP
    assert not any("pooler" in n or "classifier" in n for n in report["adapted_modules"])
