"""The BPE a scratch model trains on the lab's train split: lossless, deterministic, cached,
and part of the model's identity."""

from __future__ import annotations

import json

from tunelab.core.scratch import Bpe
from tunelab.core.spec import validate_spec
from tunelab.core.store import Store
from tunelab.data import build_data
from tunelab.modeling.bpe import scratch_tokenizer, train_bpe
from tunelab.modeling.scratch_identity import scratch_identity

TEXTS = ["naïve café: 3 €", "def f(x): return x", "the cat sat on the mat"] * 5


def test_a_byte_level_bpe_encodes_any_text_and_decodes_it_back():
    tok = train_bpe(TEXTS, Bpe(vocab_size=300))
    assert len(tok) <= 300 and tok.eos_token == "<|endoftext|>" and tok.pad_token == "<|pad|>"
    for text in ["naïve café: 3 €", "never seen: 日本語 🙂"]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text


def test_the_same_texts_and_settings_train_the_same_tokenizer():
    one, two = (train_bpe(TEXTS, Bpe(vocab_size=300)).backend_tokenizer.to_str() for _ in "ab")
    assert one == two
    assert train_bpe(TEXTS, Bpe(vocab_size=280)).backend_tokenizer.to_str() != one


def lab_with_data(tmp_path, **model):
    (tmp_path / "t.jsonl").write_text(
        "".join(json.dumps({"text": t}) + "\n" for t in TEXTS[:3] * 4)
    )
    raw = {
        "task": {"type": "pretrain"},
        "data": {
            "sources": [{"type": "jsonl", "path": "t.jsonl"}],
            "dedup": {"exact": False, "near": False},
        },
        "model": {"init": "scratch", "arch": {"hidden_size": 32, "num_attention_heads": 4}} | model,
        "method": {"type": "full"},
    }
    spec = validate_spec(raw)
    build_data(spec, tmp_path, Store(tmp_path))
    return spec


def test_the_lab_tokenizer_is_trained_once_and_its_hash_is_in_the_identity(tmp_path):
    spec = lab_with_data(tmp_path, bpe={"vocab_size": 280})
    tok, found = scratch_tokenizer(spec.model, tmp_path)
    assert found["source"] == "bpe" and found["settings"]["vocab_size"] == 280
    assert found["settings"]["train_split_sha256"]
    cache = tmp_path / ".tunelab" / "cache" / "tokenizers"
    (folder,) = cache.iterdir()
    written = (folder / "tokenizer.json").stat().st_mtime_ns
    assert scratch_tokenizer(spec.model, tmp_path)[1] == found
    assert (folder / "tokenizer.json").stat().st_mtime_ns == written  # read, not trained again
    ident = scratch_identity(spec.model, tmp_path)
    assert ident["tokenizer"]["sha256"] == found["sha256"]
    assert ident["init"] == "scratch" and ident["config_class"] == "LlamaConfig"
    assert ident["config"]["vocab_size"] == len(tok)
    other = validate_spec(
        spec.to_dict() | {"model": spec.to_dict()["model"] | {"bpe": {"vocab_size": 300}}}
    )
    assert scratch_identity(other.model, tmp_path)["weights_sha256"] != ident["weights_sha256"]


def test_a_named_tokenizer_is_used_as_it_is(tmp_path):
    train_bpe(TEXTS, Bpe(vocab_size=300)).save_pretrained(tmp_path / "tok")
    spec = lab_with_data(tmp_path, tokenizer="tok")
    tok, found = scratch_tokenizer(spec.model, tmp_path)
    assert found["source"] == "path" and len(tok) == found["vocab_size"]
    assert "tokenizer.json" in found["files"]


def test_a_recorded_run_gets_its_own_versions_tokenizer_not_the_current_one(tmp_path):
    spec = lab_with_data(tmp_path, bpe={"vocab_size": 280})
    store = Store(tmp_path)
    first = store.current_data()
    _, before = scratch_tokenizer(spec.model, tmp_path)
    more = [json.dumps({"text": f"other words entirely {i} zebra quartz"}) + "\n" for i in range(8)]
    with (tmp_path / "t.jsonl").open("a") as f:
        f.writelines(more)
    build_data(spec, tmp_path, store)
    assert store.current_data() != first
    _, now = scratch_tokenizer(spec.model, tmp_path)
    _, then = scratch_tokenizer(spec.model, tmp_path, first)
    assert now["sha256"] != before["sha256"] and then == before


def test_a_cached_bpe_changed_since_it_was_trained_is_refused_and_made_again_once_deleted(
    tmp_path,
):
    """EOS and PAD ids swapped in the cached tokenizer.json: a run trained with it under the
    same spec, and compare called it the same spec; a file that no longer parsed was an
    internal error naming neither the file nor the fix."""
    import shutil

    import pytest

    from tunelab.core.errors import TunelabError

    spec = lab_with_data(tmp_path, bpe={"vocab_size": 280})
    _, found = scratch_tokenizer(spec.model, tmp_path)
    (folder,) = (tmp_path / ".tunelab" / "cache" / "tokenizers").iterdir()
    settings = json.loads((folder / "settings.json").read_text())
    assert settings["files_sha256"] == found["files"]  # as written, by the identity's own hashes
    tokenizer = folder / "tokenizer.json"
    tokenizer.write_text(tokenizer.read_text().replace('"<|pad|>"', '"<|pad2|>"'))
    with pytest.raises(TunelabError) as err:
        scratch_tokenizer(spec.model, tmp_path)
    said = str(err.value)
    assert said.startswith(f"{folder}: the BPE cached there is not as it was trained")
    assert "(tokenizer.json changed)" in said and "delete that folder" in said
    shutil.rmtree(folder)
    assert scratch_tokenizer(spec.model, tmp_path)[1] == found  # the same BPE, trained anew
    # a BPE cached before the hashes were kept has none to check: read as it is
    del settings["files_sha256"]
    (folder / "settings.json").write_text(json.dumps(settings))
    assert scratch_tokenizer(spec.model, tmp_path)[1] == found
