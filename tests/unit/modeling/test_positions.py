"""A spec whose sequences are longer than the base model's learned positions is refused before
any model loads, naming the fields; a rotary model is not refused. Before, BERT at
`model.max_length=1000` ended in "internal error: IndexError: index out of range in self"."""

from __future__ import annotations

import json

import pytest
import yaml
from make_tiny import build_tiny_gpt2

from conftest import extraction_spec, lab_spec
from tunelab.core.lab import open_records_lab
from tunelab.modeling.positions import PositionsError, position_limit, require_positions


def lab_at(tmp_path, spec: dict, overrides: dict | None = None):
    (tmp_path / "tunelab.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return open_records_lab(tmp_path, overrides)


def test_an_encoder_longer_than_its_positions_is_refused_with_the_field(tmp_path, tiny_bert):
    assert position_limit(tiny_bert) == ("max_position_embeddings", 128)
    require_positions(lab_at(tmp_path, lab_spec(tiny_bert), {"model.max_length": 128}))
    lab = lab_at(tmp_path, lab_spec(tiny_bert), {"model.max_length": 129})
    with pytest.raises(PositionsError) as err:
        require_positions(lab)
    assert str(err.value).startswith(
        "model.max_length=129 (command line): 129 positions, more than the base model's 128 "
        f"(max_position_embeddings in {tiny_bert / 'config.json'})"
    )
    assert str(err.value).endswith("Set model.max_length to 128 or less.")


def test_generation_counts_its_new_tokens_after_a_full_prompt(tmp_path):
    gpt2 = build_tiny_gpt2(tmp_path / "gpt2")  # 256 learned positions (n_positions)
    spec = extraction_spec(gpt2, evaluation={"max_new_tokens": 64}, model={"path": str(gpt2)})
    spec["model"]["max_length"] = 192
    require_positions(lab_at(tmp_path, spec))  # 192 + 64 = 256
    spec["model"]["max_length"] = 200
    with pytest.raises(PositionsError) as err:
        require_positions(lab_at(tmp_path, spec))
    line = (tmp_path / "tunelab.yaml").read_text().splitlines().index("  max_length: 200") + 1
    assert str(err.value).startswith(
        f"model.max_length (tunelab.yaml line {line}) + evaluation.max_new_tokens = 200 + 64 = "
        "264 positions, more than the base model's 256 (n_positions in "
    )


def test_a_rotary_model_is_not_refused(tmp_path, tiny_llama):
    config = json.loads((tiny_llama / "config.json").read_text())
    assert config["max_position_embeddings"] == 256 and "rope_parameters" in config
    assert position_limit(tiny_llama) is None
    spec = extraction_spec(tiny_llama, evaluation={"max_new_tokens": 512})
    require_positions(lab_at(tmp_path, spec))


def test_a_causal_lm_scoring_labels_counts_the_longest_label(tmp_path, tiny_bert):
    """A scored label follows a prompt that may fill model.max_length: the GPT-2's 256
    positions hold max_length + the longest label's tokens (its end token is not an input)."""
    from tokenizers import Tokenizer

    gpt2 = build_tiny_gpt2(tmp_path / "gpt2")
    labels = ["business", "entertainment"]
    tokenizer = Tokenizer.from_file(str(gpt2 / "tokenizer.json"))
    longest = max(len(tokenizer.encode(x, add_special_tokens=False).ids) for x in labels)
    assert longest > 1
    spec = lab_spec(tiny_bert, task={"type": "classification", "labels": labels})
    spec["model"] = {"path": str(gpt2), "kind": "causal", "max_length": 256 - longest}
    require_positions(lab_at(tmp_path, spec))
    with pytest.raises(PositionsError) as err:
        require_positions(lab_at(tmp_path, spec, {"model.max_length": 257 - longest}))
    assert str(err.value).startswith(
        f"model.max_length={257 - longest} (command line) + the longest label's {longest} "
        f"tokens = 257 positions, more than the base model's 256"
    )
    assert str(err.value).endswith(f"Set model.max_length to {256 - longest} or less.")


def test_roberta_style_positions_count_from_after_the_padding_index(tmp_path):
    """roberta-base states 514 positions and takes 512 tokens: a spec of the stated length
    passed here and failed inside the model ("index 130 is out of bounds")."""
    config = {"model_type": "roberta", "max_position_embeddings": 130, "pad_token_id": 1}
    (tmp_path / "config.json").write_text(json.dumps(config))
    key, usable = position_limit(tmp_path)
    assert usable == 128 and key.startswith("max_position_embeddings 130 less pad_token_id 1")
    config["model_type"] = "bert"  # BERT's positions start at 0
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert position_limit(tmp_path) == ("max_position_embeddings", 130)


def test_an_encoder_decoder_base_is_refused_before_anything_loads(tmp_path):
    """BART loaded as a causal LM had dropped its encoder, trained, and exported a bundle that
    reproduced none of its predictions; T5 failed inside the model (exit 1)."""
    from tunelab.core.errors import TunelabError
    from tunelab.modeling.architecture import require_not_encoder_decoder

    config = {"model_type": "bart", "is_encoder_decoder": True}
    (tmp_path / "config.json").write_text(json.dumps(config | {"architectures": ["BartModel"]}))
    with pytest.raises(TunelabError, match=r"model.path 'bart' is an encoder-decoder model \("):
        require_not_encoder_decoder(tmp_path, "model.path 'bart'")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    require_not_encoder_decoder(tmp_path, "model.path 'bert'")
