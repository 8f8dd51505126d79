"""The check of a head that starts from a probe (`method.head_init: probe`): fitted on the slice
by the run's own code, then the model's output, or the check says why not."""

from __future__ import annotations

import numpy as np
import pytest
from test_steps import by_name, ready

from tunelab.modeling import head_init
from tunelab.stages.check.steps import run_check


def test_a_probe_head_is_fitted_and_checked_before_the_training_items(make_lab, no_reload):
    lab = ready(make_lab(), "method.head_init=probe")
    result = run_check(lab)
    names = [i["name"] for i in result["items"]]
    assert names.index("head_init") == names.index("trainable_set") + 1 < names.index("update")
    head = by_name(result)["head_init"]
    assert head["passed"], head["detail"]
    assert head["probe"]["rows"] == result["slice"]["train"]
    assert head["model_accuracy"] == pytest.approx(head["probe"]["train_accuracy"], abs=1e-4)
    assert "fitted from a probe on the slice's 16 rows" in head["detail"]
    # the training items ran from the probe's head and still see it move
    assert by_name(result)["update"]["passed"], by_name(result)["update"]["detail"]


def test_a_head_loaded_in_another_label_order_fails(make_lab, no_reload, monkeypatch):
    real = head_init.folded

    def shifted(head, labels):  # each label's row loaded into the next label's place
        weight, bias = real(head, labels)
        return np.roll(weight, 1, axis=0), np.roll(bias, 1)

    monkeypatch.setattr(head_init, "folded", shifted)
    result = run_check(ready(make_lab(), "method.head_init=probe"))
    head = by_name(result)["head_init"]
    assert not head["passed"] and "head_init" in result["failed"]
    assert "does not answer as the probe it was given" in head["detail"]


def test_a_slice_without_every_label_is_not_checked_never_passed(make_lab, no_reload):
    lab = ready(make_lab(), "method.head_init=probe")
    result = run_check(lab, rows=2)
    head = by_name(result)["head_init"]
    assert head["not_checked"] and head["passed"] is None
    assert "`tunelab check --rows" in head["detail"] and "head_init" not in result["failed"]
    assert any(w.startswith("head_init not checked") for w in result["warnings"])


def test_a_new_head_has_no_head_init_item(make_lab, no_reload):
    result = run_check(ready(make_lab()))
    assert "head_init" not in by_name(result)


def test_a_loss_fitted_already_is_not_checked_and_a_rise_from_it_is_said():
    """The image demo's full fine-tuning from a probe's head: the slice's loss started at
    0.0047, two steps at the LoRA's rate took it to 1.0709, and the check FAILED as if the
    wiring were wrong; the demo stopped there."""
    from tunelab.stages.check.update import loss_item

    rose = loss_item(0.0047, 1.0709, [0.01, 0.4], 16, 16)
    assert rose["not_checked"] and rose["passed"] is None
    assert rose["detail"].startswith("not checked: the loss starts at 0.0047, fitted already")
    assert rose["detail"].endswith("a rise that undoes the fit (lr too high?)")
    held = loss_item(0.0047, 0.0047, [0.01, 0.004], 16, 16)
    assert held["not_checked"] and "lr too high" not in held["detail"]
    assert loss_item(0.0047, 0.0002, [0.0059, 0.0048], 16, 16)["passed"]  # it fell all the same
    assert loss_item(0.9, 0.4, [0.9, 0.6], 16, 16)["passed"]  # a loss with room to fall
    assert not loss_item(0.9, 1.4, [0.9, 1.2], 16, 16)["passed"]


def test_a_probe_start_that_dropout_undoes_is_a_warning_not_a_failure(make_lab, no_reload):
    """The tests' tiny BERT: its pooled features barely vary, so dropout's noise, divided by
    their spread in the probe's folded scaler, sends the slice's loss far above a head that
    knows only the labels' frequencies. The wiring is right (the item passes); the check says
    LP-FT is here in name only."""
    result = run_check(ready(make_lab(), "method.head_init=probe"))
    head = by_name(result)["head_init"]
    assert head["passed"] and "head_init" not in result["failed"]
    prior = head["probe"]["prior_loss"]
    assert prior == pytest.approx(np.log(3), abs=0.01)  # the slice's three labels, balanced
    assert head["probe"]["train_loss"] < prior < head["loss_in_training_mode"]
    assert f"in training mode (dropout) {head['loss_in_training_mode']:.4f}" in head["detail"]
    (warned,) = [w for w in result["warnings"] if w.startswith("head_init: ")]
    assert "but the slice's loss in training mode was" in warned
    assert (
        "does not survive training mode (dropout)" in warned and "method.head_init: new" in warned
    )


def test_without_dropout_the_probe_start_holds_and_nothing_is_said(
    make_lab, no_reload, tiny_bert, tmp_path
):
    import json
    import shutil

    quiet = shutil.copytree(tiny_bert, tmp_path / "no-dropout")
    config = json.loads((quiet / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (quiet / "config.json").write_text(json.dumps(config))
    result = run_check(ready(make_lab(), "method.head_init=probe", f"model.path={quiet}"))
    head = by_name(result)["head_init"]
    assert head["passed"] and head["warning"] is None
    assert head["loss_in_training_mode"] == pytest.approx(head["probe"]["train_loss"], abs=1e-3)
    assert not [w for w in result["warnings"] if w.startswith("head_init")]


def test_a_rise_after_a_probe_start_that_dropout_undid_is_not_checked_never_failed():
    """The multilabel template on the tiny BERT: the slice's loss 0.1355 fitted, 203 and 240
    in the steps (dropout on), 2.06 after; the check FAILED as if the wiring were wrong."""
    from tunelab.stages.check.update import loss_item

    lost = {"first": 142.5, "probe": 0.11, "prior": 0.6, "message": "m"}
    rose = loss_item(0.1355, 2.0623, [203.4167, 239.7396], 4, 8, lost)
    assert rose["not_checked"] and rose["passed"] is None
    assert (
        "steps trained from losses of 203.4167, 239.7396, not from the fitted 0.1355"
        in (rose["detail"])
    )
    assert loss_item(0.1355, 0.09, [203.4, 239.7], 4, 8, lost)["passed"]  # it fell all the same
    assert not loss_item(0.1355, 2.0623, [203.4, 239.7], 4, 8)["passed"]  # no warning: failed


def test_a_label_the_train_split_lacks_fails_the_item_as_the_run_refuses_it(make_lab, no_reload):
    """`weather` only in validation: the check PASSED, advising a larger slice, and `run` then
    refused the spec (the probe is fitted on the whole train split)."""
    from conftest import topic_rows

    parts = ("validation", "test", "train", "train", "train")
    rows = [{**r, "part": parts[i % 5]} for i, r in enumerate(topic_rows())]
    rows += [{"text": f"rain and wind {i}", "label": "weather", "part": "validation"} for i in "ab"]
    lab = ready(make_lab(rows), "method.head_init=probe", "data.fields.split=part")
    result = run_check(lab)
    head = by_name(result)["head_init"]
    assert not head["passed"] and "head_init" in result["failed"] and not result["passed"]
    assert head["detail"].startswith("the train split has no example of weather: ")
    assert "`tunelab run` refuses this spec; add some, or use head_init: new" in head["detail"]


def test_the_loss_with_dropout_on_takes_the_steps_mode_and_leaves_every_buffer_as_it_was():
    """The image demo's EfficientNet: the measure ran in plain training mode, so its frozen
    batch norms read the slice's own statistics (loss 30.7, where the steps trained from
    0.006) and moved their running statistics, which the reload item then found differing
    from the base the adapter reloads on (the check FAILED)."""
    from types import SimpleNamespace

    import torch

    from tunelab.modeling.classifier_inputs import Encoded
    from tunelab.stages.check.head import _loss_in_training_mode

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(50, 4)
            self.frozen = torch.nn.BatchNorm1d(4)  # a base's norm: LoRA leaves it frozen
            self.trained = torch.nn.BatchNorm1d(4)  # a norm that trains (full fine-tuning)
            self.head = torch.nn.Linear(4, 3)

        def forward(self, input_ids, attention_mask):
            h = self.trained(self.frozen(self.embed(input_ids).mean(1)))
            return SimpleNamespace(logits=self.head(h))

    torch.manual_seed(0)
    model = Tiny()
    model.frozen.requires_grad_(False)
    model.eval()
    rows = [Encoded(str(i), [i % 50, (3 * i) % 50, 7], i % 3, False) for i in range(12)]
    before = {n: b.clone() for n, b in model.named_buffers()}
    loss = _loss_in_training_mode(model, rows, 4, 0, torch.device("cpu"))
    assert all(torch.equal(before[n], b) for n, b in model.named_buffers())
    assert not model.training and loss > 0
