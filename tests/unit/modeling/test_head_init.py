"""LP-FT: the new head starts as the probe fitted on its own input features."""

import numpy as np
import pytest
import torch
from peft import TaskType

from conftest import topic_rows
from tunelab.core.errors import TunelabError
from tunelab.core.spec import FullMethod, LoraMethod, ModelSpec, validate_spec
from tunelab.modeling.classifier_inputs import collate, encode_classification
from tunelab.modeling.head_init import folded, head_features, head_layer, init_from_probe
from tunelab.modeling.model import apply_method, load_classifier, load_tokenizer
from tunelab.modeling.probe import fit_head

CPU = torch.device("cpu")


def _built(tiny_bert, labels, method):
    spec = ModelSpec(path=str(tiny_bert))
    torch.manual_seed(0)
    model, _ = apply_method(load_classifier(spec, tiny_bert, labels, CPU), method, TaskType.SEQ_CLS)
    tok = load_tokenizer(spec, tiny_bert)
    rows = [{**r, "id": str(i)} for i, r in enumerate(topic_rows(8)) if r["label"] in labels]
    return model, encode_classification(tok, rows, labels, 32), tok.pad_token_id


def _probabilities(model, examples, pad_id):
    model.eval()
    with torch.no_grad():
        batch = collate(examples, pad_id, CPU)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    return torch.softmax(logits, -1).numpy()


@pytest.mark.parametrize(
    "labels", [["business", "sport", "tech"], ["sport", "business"]], ids=["3", "2"]
)
@pytest.mark.parametrize("method", [LoraMethod(r=2), FullMethod()], ids=["lora", "full"])
def test_the_initialised_model_predicts_what_the_probe_predicts(tiny_bert, labels, method):
    model, examples, pad_id = _built(tiny_bert, labels, method)
    _, layer = head_layer(model, len(labels))
    x = head_features(model, layer, examples, 8, pad_id, CPU)
    probe = fit_head(x, [labels[e.label] for e in examples])  # classes sorted, labels not
    record = init_from_probe(model, examples, labels, 8, pad_id, CPU)
    expected = probe.predict_proba(x)[:, [probe.classes.index(label) for label in labels]]
    got = _probabilities(model, examples, pad_id)  # float32 with the scaler folded in
    np.testing.assert_allclose(got, expected, atol=1e-4)
    assert (got.argmax(1) == expected.argmax(1)).all()
    assert record["rows"] == len(examples) and record["features"] == x.shape[1]
    assert record["train_accuracy"] == pytest.approx(
        np.mean(expected.argmax(1) == [e.label for e in examples]), abs=1e-4
    )
    # the probe's loss is the model's own first one in evaluation mode; the prior's is that of
    # a head predicting the labels' shares (here equal: the log of the number of labels)
    gold = torch.tensor([e.label for e in examples])
    first = torch.nn.functional.cross_entropy(torch.log(torch.tensor(got)), gold)
    assert record["train_loss"] == pytest.approx(float(first), abs=1e-3)
    assert record["prior_loss"] == pytest.approx(np.log(len(labels)), abs=1e-4)


def test_under_lora_the_trained_copy_of_the_head_is_the_one_initialised(tiny_bert):
    labels = ["business", "sport", "tech"]
    model, examples, pad_id = _built(tiny_bert, labels, LoraMethod(r=2))
    name, _ = head_layer(model, len(labels))
    assert name.endswith("modules_to_save.default")
    original = dict(model.named_modules())[
        name.replace("modules_to_save.default", "original_module")
    ]
    before = original.weight.clone()
    init_from_probe(model, examples, labels, 8, pad_id, CPU)
    assert torch.equal(original.weight, before)  # the base's own head is left as loaded


def test_two_classes_fold_into_a_symmetric_pair_of_rows():
    from tunelab.modeling.probe import Head

    head = Head(
        mean=np.array([1.0, 2.0]),
        scale=np.array([2.0, 4.0]),
        coef=np.array([[4.0, 8.0]]),
        intercept=np.array([1.0]),
        classes=["a", "b"],
    )
    weight, bias = folded(head, ["b", "a"])
    x = np.array([3.0, -1.0])
    s = head.coef[0] @ ((x - head.mean) / head.scale) + head.intercept[0]  # log-odds of "b"
    logits = weight @ x + bias
    assert logits[0] - logits[1] == pytest.approx(s)


def test_a_train_split_without_some_label_is_refused(tiny_bert):
    labels = ["business", "sport", "tech"]
    model, examples, pad_id = _built(tiny_bert, labels, FullMethod())
    with pytest.raises(TunelabError, match="no example of \\['tech'\\]"):
        init_from_probe(model, [e for e in examples if e.label != 2], labels, 8, pad_id, CPU)


def test_head_init_probe_needs_a_new_head(tmp_path):
    spec = {
        "task": {"type": "extraction", "required": ["name"], "json_schema": {"type": "object"}},
        "data": {"sources": [{"type": "jsonl", "path": "d.jsonl"}]},
        "model": {"path": "m"},
        "method": {"type": "lora", "head_init": "probe"},
    }
    with pytest.raises(Exception, match=r"method\.head_init"):
        validate_spec(spec)
