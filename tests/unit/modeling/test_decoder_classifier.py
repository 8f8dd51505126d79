"""A decoder as a classifier (GPT-2 here): a tokenizer without a pad token, a config without a
pad id, and blocks whose linear layers are transformers' `Conv1D`. Each used to stop a lab
before its first step (a TypeError in the probe, "no blocks were found" in the check)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from make_tiny import build_tiny_gpt2
from peft import TaskType
from transformers.pytorch_utils import Conv1D

from tunelab.core.errors import TunelabError
from tunelab.core.spec import LoraMethod, ModelSpec
from tunelab.modeling.classifier_inputs import collate, encode_classification
from tunelab.modeling.model import apply_method, load_classifier, load_encoder, load_tokenizer
from tunelab.modeling.probe import features
from tunelab.modeling.render import pad_id

LABELS = ["business", "sport"]
CPU = torch.device("cpu")
ROWS = [
    {"id": "a", "text": "the bank cut interest rates", "label": "business"},
    {
        "id": "b",
        "text": "the team won the match with a late goal and the fans cheered",
        "label": "sport",
    },
]


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    return build_tiny_gpt2(tmp_path_factory.mktemp("models") / "tiny-gpt2")


def test_batches_are_padded_with_the_end_token_when_there_is_no_pad_token(tiny_gpt2):
    tokenizer = load_tokenizer(ModelSpec(path=str(tiny_gpt2)), tiny_gpt2)
    assert tokenizer.pad_token_id is None
    assert pad_id(tokenizer) == tokenizer.eos_token_id
    tokenizer.eos_token = None
    with pytest.raises(TunelabError, match="neither a pad token nor an end-of-text token"):
        pad_id(tokenizer)


def test_the_classifier_reads_each_text_at_its_own_last_token_in_a_padded_batch(tiny_gpt2):
    spec = ModelSpec(path=str(tiny_gpt2))
    model = load_classifier(spec, tiny_gpt2, LABELS, CPU).eval()
    tokenizer = load_tokenizer(spec, tiny_gpt2)
    assert model.config.pad_token_id == tokenizer.eos_token_id
    encoded = encode_classification(tokenizer, ROWS, LABELS, 64)
    assert len(encoded[0].input_ids) < len(encoded[1].input_ids)  # the first one is padded
    with torch.no_grad():
        together = model(**collate(encoded, pad_id(tokenizer), CPU)).logits
        alone = torch.cat([model(**collate([e], 0, CPU)).logits for e in encoded])
    torch.testing.assert_close(together, alone)


def test_the_probe_embeds_texts_without_a_pad_token(tiny_gpt2):
    spec = ModelSpec(path=str(tiny_gpt2))
    tokenizer, encoder = load_tokenizer(spec, tiny_gpt2), load_encoder(spec, tiny_gpt2, CPU)
    x = features(encoder, tokenizer, ROWS, LABELS, 64, 2, CPU)
    alone = [features(encoder, tokenizer, [row], LABELS, 64, 1, CPU)[0] for row in ROWS]
    np.testing.assert_allclose(x, np.stack(alone), atol=1e-5)  # padding is masked out


def test_lora_adapts_every_conv1d_of_the_blocks_without_peft_warning(tiny_gpt2):
    model = load_classifier(ModelSpec(path=str(tiny_gpt2)), tiny_gpt2, LABELS, CPU)
    base = {n for n, m in model.named_modules() if isinstance(m, Conv1D)}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        peft_model, report = apply_method(model, LoraMethod(r=2), TaskType.SEQ_CLS)
    # PEFT warns when it has to switch fan_in_fan_out on itself
    assert not [w for w in seen if "fan_in_fan_out" in str(w.message)]
    assert len(base) == 8  # c_attn, c_proj, mlp.c_fc, mlp.c_proj in each of 2 blocks
    assert sorted(report["adapted_modules"]) == sorted(base)
    assert peft_model.peft_config["default"].fan_in_fan_out is True
    assert report["modules_to_save"] == ["score"]  # its own head, not a BERT's classifier


def test_a_checkpoint_s_head_is_kept_only_for_the_same_labels_in_order(tiny_gpt2, tmp_path):
    """A fine-tuned checkpoint's head of another size used to stop the load ("You set
    `ignore_mismatched_sizes` to `False`"); one of the same size for other labels was kept, so
    a new lab's first logits were another task's. Now: the same labels in order keep it, any
    other head is drawn anew from torch's seed."""
    from transformers import AutoModelForSequenceClassification

    five = ["a", "b", "c", "d", "e"]
    tuned = tmp_path / "tuned"
    head = AutoModelForSequenceClassification.from_pretrained(
        tiny_gpt2, num_labels=5, id2label=dict(enumerate(five)), pad_token_id=0
    )
    head.save_pretrained(tuned)
    load_tokenizer(ModelSpec(path=str(tiny_gpt2)), tiny_gpt2).save_pretrained(tuned)
    saved = head.score.weight.detach().clone()

    def loaded(labels):
        return load_classifier(ModelSpec(path=str(tuned)), tuned, labels, CPU).score.weight

    torch.testing.assert_close(loaded(five), saved)  # the same labels, in order: kept
    assert not torch.equal(loaded(["e", "d", "c", "b", "a"]), saved)  # same size, other order
    assert loaded(LABELS).shape == (2, 32)  # another size: a new head, no error


def test_lp_ft_on_a_decoder_starts_from_the_probe_on_each_text_s_last_token(tiny_gpt2):
    """`head_init: probe`, the classification template's own, stopped every decoder lab with
    "Found array with dim 3" (exit 1): the head reads every position. The features are the
    position whose logits the model keeps, so its first predictions are the probe's."""
    from tunelab.modeling.head_init import head_features, head_layer, init_from_probe

    spec = ModelSpec(path=str(tiny_gpt2))
    torch.manual_seed(0)
    model, _ = apply_method(
        load_classifier(spec, tiny_gpt2, LABELS, CPU), LoraMethod(r=2), TaskType.SEQ_CLS
    )
    tokenizer = load_tokenizer(spec, tiny_gpt2)
    rows = [{**r, "id": f"{r['id']}{i}"} for i in range(4) for r in ROWS]
    encoded = encode_classification(tokenizer, rows, LABELS, 64)
    pad = pad_id(tokenizer)
    _, layer = head_layer(model, len(LABELS))
    together = head_features(model, layer, encoded, 8, pad, CPU)  # padded batches
    alone = np.concatenate([head_features(model, layer, [e], 1, pad, CPU) for e in encoded])
    assert together.shape == (8, 32)
    np.testing.assert_allclose(together, alone, atol=1e-5)
    record = init_from_probe(model, encoded, LABELS, 8, pad, CPU)
    model.eval()
    with torch.no_grad():
        logits = model(**collate(encoded, pad, CPU)).logits
    gold = torch.tensor([e.label for e in encoded])
    accuracy = float((logits.argmax(-1) == gold).float().mean())
    assert accuracy == pytest.approx(record["train_accuracy"], abs=1e-6)
    # the whole probe is in the bias-less `score`: its loss is the model's first (the probe's
    # intercept and centring, dropped with no bias to hold them, had moved the start)
    first = float(torch.nn.functional.cross_entropy(logits, gold))
    assert first == pytest.approx(record["train_loss"], abs=1e-3)
