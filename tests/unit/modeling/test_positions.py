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
