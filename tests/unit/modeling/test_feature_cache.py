"""LP-FT's head features, kept in the store: a family of runs embeds its train split once, and a
run that reads them fits the probe it would have fitted on its own."""

import json

import numpy as np
import torch
from peft import TaskType

from conftest import topic_rows
from tunelab.cli import main
from tunelab.core.spec import FullMethod, LoraMethod, ModelSpec
from tunelab.modeling.classifier_inputs import encode_classification
from tunelab.modeling.feature_cache import FeatureCache
from tunelab.modeling.head_init import head_layer, init_from_probe
from tunelab.modeling.model import apply_method, load_classifier, load_tokenizer

CPU = torch.device("cpu")
LABELS = ["business", "sport", "tech"]


def _built(tiny_bert, method, seed: int):
    """A classifier as a run builds it: its head and any LoRA A drawn from `seed`."""
    spec = ModelSpec(path=str(tiny_bert))
    torch.manual_seed(seed)
    model, _ = apply_method(load_classifier(spec, tiny_bert, LABELS, CPU), method, TaskType.SEQ_CLS)
    tok = load_tokenizer(spec, tiny_bert)
    rows = [{**r, "id": str(i)} for i, r in enumerate(topic_rows(8))]
    return model, encode_classification(tok, rows, LABELS, 32), tok.pad_token_id


def _forwards(model) -> list[int]:
    """A counter of the model's forward passes."""
    calls = []
    model.register_forward_hook(lambda *_: calls.append(1))
    return calls


def _head(model) -> torch.Tensor:
    return head_layer(model, len(LABELS))[1].weight.detach().clone()


def test_a_second_seed_reads_the_features_and_fits_the_same_head(tiny_bert, tmp_path):
    cache = FeatureCache(tmp_path / "cache", {"base": "tiny", "method": "lora"})
    first, examples, pad_id = _built(tiny_bert, LoraMethod(r=2), seed=0)
    made = init_from_probe(first, examples, LABELS, 8, pad_id, CPU, cache)
    assert made["features_cached"] is False and len(list(cache.folder.iterdir())) == 1

    second, examples, pad_id = _built(tiny_bert, LoraMethod(r=2), seed=1)
    calls = _forwards(second)
    read = init_from_probe(second, examples, LABELS, 8, pad_id, CPU, cache)
    assert read["features_cached"] is True and calls == []  # no pass over the train split
    assert read["train_accuracy"] == made["train_accuracy"]

    alone, examples, pad_id = _built(tiny_bert, LoraMethod(r=2), seed=2)
    init_from_probe(alone, examples, LABELS, 8, pad_id, CPU)  # no cache: computed here
    assert torch.equal(_head(second), _head(alone))  # the same bits as a run on its own


def test_what_changes_the_features_changes_the_key(tiny_bert, tmp_path):
    model, examples, pad_id = _built(tiny_bert, LoraMethod(r=2), seed=0)
    name = head_layer(model, len(LABELS))[0]
    cache = FeatureCache(tmp_path, {"base": "tiny", "method": "lora"})
    key = cache.key(model, name, examples, 8, pad_id, CPU)
    assert cache.key(model, name, examples, 8, pad_id, CPU) == key
    edited = [examples[0].__class__(**{**vars(examples[0]), "input_ids": [1, 2, 3]})]
    others = [
        cache.key(model, name, edited + examples[1:], 8, pad_id, CPU),  # one example's tokens
        cache.key(model, name, examples[::-1], 8, pad_id, CPU),  # their order
        cache.key(model, name, examples, 4, pad_id, CPU),  # the batch size
        cache.key(model, "pooler", examples, 8, pad_id, CPU),  # the layer
        FeatureCache(tmp_path, {"base": "tiny", "method": "full"}).key(
            model, name, examples, 8, pad_id, CPU
        ),
        cache.key(model.to(torch.bfloat16), name, examples, 8, pad_id, CPU),  # the dtype
    ]
    assert len({key, *others}) == 1 + len(others)


def test_an_unreadable_or_wrong_sized_file_is_a_miss_and_is_rewritten(tiny_bert, tmp_path):
    cache = FeatureCache(tmp_path, {"base": "tiny", "method": "full"})
    model, examples, pad_id = _built(tiny_bert, FullMethod(), seed=0)
    key = cache.key(model, head_layer(model, len(LABELS))[0], examples, 8, pad_id, CPU)
    path = tmp_path / f"{key}.npy"
    path.write_bytes(b"\x93NUMPY half a file")
    assert (
        init_from_probe(model, examples, LABELS, 8, pad_id, CPU, cache)["features_cached"] is False
    )
    assert cache.load(key, len(examples)).shape[0] == len(examples)  # rewritten whole
    assert cache.load(key, len(examples) + 1) is None
    np.save(path, np.zeros((len(examples),)))  # one dimension: not features
    assert cache.load(key, len(examples)) is None


def test_a_run_with_another_seed_reads_the_first_run_s_features(make_lab, capsys):
    lab = make_lab(method={"type": "full", "head_init": "probe"})

    def tl(*args):
        code = main([*args, "--lab", str(lab), "--json"])
        return code, json.loads(capsys.readouterr().out)

    assert tl("data")[0] == 0 and tl("baseline")[0] == 0
    code, first = tl("run", "--name", "lpft")
    assert code == 0 and first["trainable"]["head_init"]["features_cached"] is False
    # the tiny BERT's probe start does not survive dropout: the run records and says so
    lost, head = first["training"]["start_lost"], first["trainable"]["head_init"]
    assert lost["probe"] == head["train_loss"] < head["prior_loss"] < lost["first"]
    from io import StringIO

    from rich.console import Console

    from tunelab.views.runs import run as run_view

    console = Console(file=StringIO(), record=True, width=2000)
    run_view(first, console)
    assert f"warning {lost['message']}" in console.export_text()
    code, second = tl("run", "--name", "lpft-seed1", "--parent", first["id"], "training.seed=1")
    assert code == 0 and second["trainable"]["head_init"]["features_cached"] is True
    assert (
        second["trainable"]["head_init"]["train_accuracy"]
        == (first["trainable"]["head_init"]["train_accuracy"])
    )
    code, lora = tl(
        "run",
        "--name",
        "lora",
        "--parent",
        first["id"],
        "method.type=lora",
        "method.head_init=probe",
    )
    assert code == 0 and lora["trainable"]["head_init"]["features_cached"] is False
