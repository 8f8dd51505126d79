"""The multilabel head: multi-hot targets, a binary cross-entropy per label, the one-vs-rest
probe (stored and read back) and LP-FT from it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from peft import TaskType
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from tunelab.core.errors import TunelabError
from tunelab.core.spec import FullMethod, LoraMethod, ModelSpec
from tunelab.modeling.classifier_inputs import collate, encode_classification
from tunelab.modeling.head_init import head_features, head_layer, init_from_probe
from tunelab.modeling.model import apply_method, load_classifier, load_tokenizer
from tunelab.modeling.multilabel_head import (
    PROBLEM_TYPE,
    fit_multilabel_head,
    load_multilabel_head,
    mark_multilabel,
    save_multilabel_head,
)
from tunelab.modeling.probe import HEAD_FILE, fit_head, load_head, save_head
from tunelab.training.step import summed_loss

CPU = torch.device("cpu")
LABELS = ["business", "sport", "tech"]
WORDS = {"business": "market bank profits", "sport": "goal match fans", "tech": "chip phone screen"}
SETS = [["business"], ["sport"], ["tech"], ["business", "tech"], ["sport", "tech"], []]


def rows(n: int = 24) -> list[dict]:
    out = []
    for i in range(n):
        labels = SETS[i % len(SETS)]
        text = " ".join(WORDS[t] for t in labels) or "weather rain"
        out.append({"id": str(i), "text": f"{text} {i}", "label": str(labels), "labels": labels})
    return out


def test_a_multilabel_row_is_trained_on_a_zero_or_one_per_label(tiny_bert) -> None:
    tok = load_tokenizer(ModelSpec(path=str(tiny_bert)), tiny_bert)
    encoded = encode_classification(tok, rows(6), LABELS, 32)
    assert [e.label for e in encoded[3:6]] == [(1.0, 0.0, 1.0), (0.0, 1.0, 1.0), (0.0, 0.0, 0.0)]
    batch = collate(encoded, tok.pad_token_id, CPU)
    assert batch["labels"].dtype == torch.float32 and batch["labels"].shape == (6, 3)


def test_the_loss_is_each_examples_mean_binary_cross_entropy_summed(tiny_bert) -> None:
    spec = ModelSpec(path=str(tiny_bert))
    torch.manual_seed(0)
    model = load_classifier(spec, tiny_bert, LABELS, CPU).eval()
    tok = load_tokenizer(spec, tiny_bert)
    batch = collate(encode_classification(tok, rows(6), LABELS, 32), tok.pad_token_id, CPU)
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    expected = torch.nn.BCEWithLogitsLoss()(logits, batch["labels"]) * 6  # mean over all, x n
    assert summed_loss(model, batch).item() == pytest.approx(expected.item(), rel=1e-5)
    mark_multilabel(model)
    assert model.config.problem_type == PROBLEM_TYPE


def test_the_probe_is_one_logistic_regression_per_label(tmp_path) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 5)).astype(np.float32)
    sets = [[label for j, label in enumerate(LABELS) if x[i, j] > 0] for i in range(40)]
    head = fit_multilabel_head(x, sets, LABELS)
    z = StandardScaler().fit_transform(x)
    for j, label in enumerate(LABELS):
        y = [label in s for s in sets]
        expected = LogisticRegression(max_iter=2000).fit(z, y).predict_proba(z)[:, 1]
        np.testing.assert_allclose(head.predict_proba(x)[:, j], expected, atol=1e-6)
    save_multilabel_head(head, tmp_path / HEAD_FILE)
    again = load_multilabel_head(tmp_path / HEAD_FILE)
    np.testing.assert_array_equal(again.predict_proba(x), head.predict_proba(x))
    assert again.classes == LABELS


def test_a_label_on_every_row_or_none_is_a_constant_probability() -> None:
    x = np.random.default_rng(1).normal(size=(10, 4))
    head = fit_multilabel_head(x, [["sport"]] * 5 + [["sport", "tech"]] * 5, LABELS)
    p = head.predict_proba(x)
    assert np.allclose(p[:, 0], 0.001) and np.allclose(p[:, 1], 0.999)
    assert (head.coef[:2] == 0).all()


def test_a_single_label_head_is_not_read_as_a_multilabel_one(tmp_path) -> None:
    x = np.random.default_rng(2).normal(size=(12, 3))
    save_head(fit_head(x, ["a", "b"] * 6), tmp_path / HEAD_FILE)
    with pytest.raises(TunelabError, match="not a multilabel probe head"):
        load_multilabel_head(tmp_path / HEAD_FILE)
    assert load_head(tmp_path / HEAD_FILE).classes == ["a", "b"]


@pytest.mark.parametrize("method", [LoraMethod(r=2), FullMethod()], ids=["lora", "full"])
def test_lp_ft_starts_the_sigmoids_at_the_probes_probabilities(tiny_bert, method) -> None:
    spec = ModelSpec(path=str(tiny_bert))
    torch.manual_seed(0)
    base = load_classifier(spec, tiny_bert, LABELS, CPU)
    model, _ = apply_method(base, method, TaskType.SEQ_CLS)
    tok = load_tokenizer(spec, tiny_bert)
    examples = encode_classification(tok, rows(), LABELS, 32)
    _, layer = head_layer(model, len(LABELS))
    x = head_features(model, layer, examples, 8, tok.pad_token_id, CPU)
    probe = fit_multilabel_head(x, [r["labels"] for r in rows()], LABELS)
    record = init_from_probe(model, examples, LABELS, 8, tok.pad_token_id, CPU)
    model.eval()
    with torch.no_grad():
        batch = collate(examples, tok.pad_token_id, CPU)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    np.testing.assert_allclose(torch.sigmoid(logits).numpy(), probe.predict_proba(x), atol=1e-4)
    assert record["from"] == "probe (one-vs-rest)" and record["rows"] == len(examples)
    # both losses as the run counts one: each example's labels' mean binary cross-entropy
    targets = torch.tensor([e.label for e in examples], dtype=torch.float32)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    assert record["train_loss"] == pytest.approx(float(bce(logits, targets)), abs=1e-3)
    shares = targets.mean(0).clamp(1e-12, 1 - 1e-12)
    prior = bce(torch.logit(shares).expand_as(targets), targets)
    assert record["prior_loss"] == pytest.approx(float(prior), abs=1e-4)


def test_a_probe_for_a_head_without_bias_has_no_intercept_to_drop():
    """A decoder's `score` has no bias: the probe folded into it had lost its intercept and
    centring. Without one, the probe is fitted scaled, not centred, with no intercept."""
    from tunelab.modeling.multilabel_head import fit_multilabel_head

    rng = np.random.default_rng(0)
    x = rng.normal(2.0, 1.0, (40, 3))
    sets = [["a"] if v > 2.0 else ["b"] for v in x[:, 0]]
    head = fit_multilabel_head(x, sets, ["a", "b", "c"], intercept=False)
    assert not head.mean.any() and not head.intercept.any()  # "c" in no row: even odds
    assert (head.predict_proba(x)[:, 2] == 0.5).all()
