import hashlib
import json
import shutil

import pytest
import torch
from peft import TaskType

from tunelab.core.spec import FullMethod, LoraMethod, ModelSpec
from tunelab.modeling.classifier_inputs import encode_classification
from tunelab.modeling.identity import identity
from tunelab.modeling.model import (
    ModelError,
    apply_method,
    load_classifier,
    load_tokenizer,
    load_trained_classifier,
)
from tunelab.modeling.safety import ModelFolderError, RemoteCodeWarning, require_safetensors
from tunelab.modeling.saved import save_trained
from tunelab.training.evaluate import predict_classifier

LABELS = ["business", "sport", "tech"]
CPU = torch.device("cpu")


def test_lora_target_that_matches_nothing_lists_the_layers(tiny_bert):
    spec = ModelSpec(path=str(tiny_bert))
    model = load_classifier(spec, tiny_bert, LABELS, CPU)
    with pytest.raises(ModelError) as err:
        apply_method(model, LoraMethod(target_modules=["q_proj"]), TaskType.SEQ_CLS)
    assert "q_proj" in str(err.value) and "query" in str(err.value)


def test_lora_report_counts_adapters_and_head(tiny_bert):
    spec = ModelSpec(path=str(tiny_bert))
    model, report = apply_method(
        load_classifier(spec, tiny_bert, LABELS, CPU),
        LoraMethod(r=2, target_modules=["query", "value"]),
        TaskType.SEQ_CLS,
    )
    assert report["target_modules"] == {"query": 2, "value": 2}  # two layers
    assert 0 < report["trainable_params"] < report["total_params"]
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert any("lora_A" in n for n in trainable) and any("classifier" in n for n in trainable)
    assert not any("word_embeddings" in n for n in trainable)


def test_full_method_trains_everything(tiny_bert):
    spec = ModelSpec(path=str(tiny_bert))
    _, report = apply_method(
        load_classifier(spec, tiny_bert, LABELS, CPU), FullMethod(), TaskType.SEQ_CLS
    )
    assert report["trainable_params"] == report["total_params"]


@pytest.mark.parametrize("method", [LoraMethod(r=2), FullMethod()], ids=["lora", "full"])
def test_saved_weights_reload_to_the_same_predictions(tiny_bert, tmp_path, method):
    spec = ModelSpec(path=str(tiny_bert))
    torch.manual_seed(0)
    model, _ = apply_method(load_classifier(spec, tiny_bert, LABELS, CPU), method, TaskType.SEQ_CLS)
    with torch.no_grad():  # move the weights off their initial values
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.01 * torch.randn_like(p))
    files = save_trained(model, tmp_path / "w")
    assert any(f.endswith(".safetensors") for f in files)
    if "adapter_config.json" in files:  # a set written in its hash order: sorted, one order
        config = json.loads((tmp_path / "w" / "adapter_config.json").read_text())
        assert config["target_modules"] == sorted(model.peft_config["default"].target_modules)
    tok = load_tokenizer(spec, tiny_bert)
    data = encode_classification(
        tok,
        [
            {"id": "1", "text": "the team scored", "label": "sport"},
            {"id": "2", "text": "bank rates", "label": "business"},
        ],
        LABELS,
        16,
    )
    before = predict_classifier(model, data, LABELS, 2, CPU, tok.pad_token_id)
    again = load_trained_classifier(spec, tiny_bert, LABELS, tmp_path / "w", CPU)
    after = predict_classifier(again, data, LABELS, 2, CPU, tok.pad_token_id)
    # the same labels; confidences are rounded to 4 decimals, and float noise in the last bit
    # can flip that rounding (a fresh-clone CI run saw 0.3402 against 0.3401)
    assert [(p["id"], p["predicted"]) for p in after] == [(p["id"], p["predicted"]) for p in before]
    for a, b in zip(after, before, strict=True):
        assert a["confidence"] == pytest.approx(b["confidence"], abs=2e-4)


def test_identity_hashes_the_weights(tiny_bert):
    ident = identity(ModelSpec(path=str(tiny_bert)), tiny_bert)
    assert ident["weight_files"] == ["model.safetensors"]
    weights = (tiny_bert / "model.safetensors").read_bytes()
    expected = hashlib.sha256(b"model.safetensors" + weights).hexdigest()  # name, then bytes
    assert ident["weights_sha256"] == expected


# --- what a model folder may load and run ---------------------------------------------------------


class _Tripwire:
    """Unpickling this creates `path`: a stand-in for the code a pickled weight file can run."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def _copy_model(src, dst, weights: bool = True):
    dst.mkdir()
    for f in src.iterdir():
        if weights or f.suffix != ".safetensors":
            shutil.copy(f, dst / f.name)
    return dst


def test_pickled_weights_only_are_refused_before_loading_with_how_to_convert(tiny_bert, tmp_path):
    folder = _copy_model(tiny_bert, tmp_path / "pickled", weights=False)
    marker = tmp_path / "code-ran"
    torch.save({"weights": _Tripwire(marker)}, folder / "pytorch_model.bin")
    spec = ModelSpec(path="pickled")
    for load in (
        lambda: identity(spec, tmp_path),
        lambda: load_classifier(spec, tmp_path, LABELS, CPU),
        lambda: load_tokenizer(spec, tmp_path),
    ):
        with pytest.raises(ModelFolderError) as err:
            load()
        message = str(err.value)
        assert "model.path 'pickled'" in message and "pytorch_model.bin" in message
        assert "BertModel.from_pretrained(" in message  # the class the config names
        assert "save_pretrained(" in message and "safe_serialization=True" in message
    assert not marker.exists()


def test_a_pickle_beside_safetensors_is_neither_loaded_nor_hashed(tiny_bert, tmp_path):
    folder = _copy_model(tiny_bert, tmp_path / "both")
    marker = tmp_path / "code-ran"
    torch.save({"weights": _Tripwire(marker)}, folder / "pytorch_model.bin")
    spec = ModelSpec(path=str(folder))
    ident = identity(spec, folder)
    assert ident["weight_files"] == ["model.safetensors"]
    assert "pytorch_model.bin" not in ident["files"]
    assert (
        ident["weights_sha256"]
        == identity(ModelSpec(path=str(tiny_bert)), tiny_bert)["weights_sha256"]
    )
    load_classifier(spec, folder, LABELS, CPU)
    assert not marker.exists()  # use_safetensors=True: no fallback to the pickle


def test_an_adapter_saved_as_a_pickle_is_refused(tmp_path):
    (tmp_path / "adapter_config.json").write_text("{}")
    (tmp_path / "adapter_model.bin").write_bytes(b"not loaded")
    (tmp_path / "model.safetensors").write_bytes(b"")  # a stray file does not stand in for it
    with pytest.raises(ModelFolderError, match=r"adapter_model\.bin.*PeftModel\.from_pretrained"):
        require_safetensors(tmp_path, "the trained weights")


def test_trusted_remote_code_warns_and_its_files_are_hashed(tiny_bert, tmp_path):
    folder = _copy_model(tiny_bert, tmp_path / "remote")
    code = b"# the model's own code\nVALUE = 1\n"
    (folder / "modeling_custom.py").write_bytes(code)
    (folder / "sub").mkdir()
    (folder / "sub" / "helpers.py").write_bytes(b"")
    spec = ModelSpec(path=str(folder), trust_remote_code=True)
    ident = identity(spec, folder)
    assert ident["remote_code"]["files"] == {
        "modeling_custom.py": hashlib.sha256(code).hexdigest(),
        "sub/helpers.py": hashlib.sha256(b"").hexdigest(),
    }
    assert ident["remote_code"]["auto_map"] is None  # BERT's config names no custom class
    with pytest.warns(RemoteCodeWarning, match=r"trust_remote_code is true.*modeling_custom\.py"):
        load_tokenizer(spec, folder)
    assert "remote_code" not in identity(ModelSpec(path=str(folder)), folder)


def test_an_adapters_config_is_written_in_one_order(tiny_bert, tmp_path):
    """target_modules is a set, written in the order of Python's string hashing, which changes
    from process to process: two identical trainings had different weight hashes."""
    spec = ModelSpec(path=str(tiny_bert))
    targets = ["value", "query", "key", "dense"]
    method = LoraMethod(r=2, target_modules=targets)
    model, _ = apply_method(load_classifier(spec, tiny_bert, LABELS, CPU), method, TaskType.SEQ_CLS)
    save_trained(model, tmp_path / "w")
    config = json.loads((tmp_path / "w" / "adapter_config.json").read_text())
    assert config["target_modules"] == sorted(targets)


def _with_tokenizer(model, tiny_bert, folder):
    """`model` saved in `folder` with the tests' tiny BERT tokenizer beside it."""
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (tiny_bert / name).is_file():
            shutil.copy(tiny_bert / name, folder / name)
    return folder


def _reloads_as_trained(model, spec, folder, tmp_path) -> None:
    """`model`'s trainable tensors moved, saved, and loaded again under another torch seed (a
    module the checkpoint lacks is drawn anew): the same predictions."""
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.01 * torch.randn_like(p))
    save_trained(model, tmp_path / "w")
    tok = load_tokenizer(spec, folder)
    rows = [{"id": "1", "text": "the team scored", "label": "sport"}]
    data = encode_classification(tok, rows, LABELS, 16)
    before = predict_classifier(model, data, LABELS, 2, CPU, tok.pad_token_id)
    torch.manual_seed(1)
    again = load_trained_classifier(spec, folder, LABELS, tmp_path / "w", CPU)
    after = predict_classifier(again, data, LABELS, 2, CPU, tok.pad_token_id)
    # confidences are rounded to 4 decimals, and float noise in the last bit can flip that
    # rounding (a fresh-clone CI run saw 0.34 against 0.3401); a module drawn anew moves far more
    assert [p["predicted"] for p in after] == [p["predicted"] for p in before]
    for a, b in zip(after, before, strict=True):
        assert a["confidence"] == pytest.approx(b["confidence"], abs=2e-4)


def test_a_pooler_the_checkpoint_lacks_is_trained_and_saved_under_lora(tiny_bert, tmp_path):
    """A masked-LM checkpoint has no pooler (DeBERTa-v3's, ALBERT's): it was drawn at random,
    frozen under LoRA and left out of the adapter, so each load drew another, and the bundle
    reproduced none of its predictions."""
    from transformers import BertForMaskedLM

    masked = _with_tokenizer(BertForMaskedLM.from_pretrained(tiny_bert), tiny_bert, tmp_path / "m")
    spec = ModelSpec(path=str(masked))
    torch.manual_seed(0)
    loaded = load_classifier(spec, masked, LABELS, CPU)
    model, report = apply_method(loaded, LoraMethod(r=2), TaskType.SEQ_CLS)
    assert report["drawn_at_random"] == ["bert.pooler.dense"]
    assert any(m.endswith("pooler.dense") for m in report["modules_to_save"])
    _reloads_as_trained(model, spec, masked, tmp_path)


def test_a_base_s_changed_files_are_those_its_record_hashed_otherwise():
    """What `final`, `export`, `resume` and `noise` name of a base edited since the run."""
    from tunelab.modeling.identity import changed_files

    recorded = {
        "weight_files": ["model.safetensors"],
        "files": {"model.safetensors": "a", "tokenizer.json": "t"},
    }
    same = {"weight_files": ["model.safetensors"], "files": dict(recorded["files"])}
    assert changed_files(recorded, same) == []
    edited = same | {"files": {"model.safetensors": "a", "tokenizer.json": "u"}}
    assert changed_files(recorded, edited) == ["tokenizer.json"]
    added = {
        "weight_files": ["model.safetensors", "extra.safetensors"],
        "files": {**same["files"], "extra.safetensors": "e", "chat_template.jinja": "c"},
    }
    assert changed_files(recorded, added) == [
        "extra.safetensors"
    ]  # a file it did not hash: not named
    assert changed_files({"weights_sha256": "w"}, edited) == []  # an older record: the digest alone


def test_a_head_of_two_layers_new_from_the_checkpoint_is_saved_whole_once(tiny_bert, tmp_path):
    """RoBERTa's and ELECTRA's head is `classifier` (dense, then out_proj), all of it new: its
    `classifier.dense` named again as a module to save, inside PEFT's copy of `classifier`,
    froze it and left a bundle that would not load."""
    from transformers import RobertaConfig, RobertaModel

    config = RobertaConfig(
        vocab_size=2000,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        pad_token_id=1,
    )
    roberta = _with_tokenizer(RobertaModel(config), tiny_bert, tmp_path / "roberta")
    spec = ModelSpec(path=str(roberta))
    torch.manual_seed(0)
    loaded = load_classifier(spec, roberta, LABELS, CPU)
    model, report = apply_method(loaded, LoraMethod(r=2), TaskType.SEQ_CLS)
    assert "drawn_at_random" not in report and report["modules_to_save"] == ["classifier"]
    saved = [p for n, p in model.named_parameters() if "classifier.modules_to_save" in n]
    assert len(saved) == 4 and all(p.requires_grad for p in saved)  # dense and out_proj
    _reloads_as_trained(model, spec, roberta, tmp_path)
