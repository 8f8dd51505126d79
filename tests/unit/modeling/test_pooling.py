"""A sentence-embedding base's own pooling, read from its sentence-transformers files, and the
note a classifier run on it gets."""

import json
from pathlib import Path

import pytest

from tunelab.demo.assets import minilm
from tunelab.modeling.pooling import pooling_note, trained_pooling


def st_folder(tmp_path: Path, **modes: bool) -> Path:
    """A folder laid out as sentence-transformers saves one, with these pooling modes."""
    folder = tmp_path / "model"
    (folder / "1_Pooling").mkdir(parents=True)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    config = {"word_embedding_dimension": 8, **{f"pooling_mode_{k}": v for k, v in modes.items()}}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(config))
    return folder


def test_the_demo_encoder_is_mean_pooled_and_its_classifier_runs_get_the_note():
    assert trained_pooling(minilm()) == ["mean"]
    assert "trained to be read mean-pooled" in pooling_note(minilm())


@pytest.mark.parametrize(
    "modes, expected",
    [
        ({"cls_token": True, "mean_tokens": False}, ["cls"]),
        ({"mean_tokens": True, "max_tokens": True}, ["mean", "max"]),
    ],
)
def test_the_declared_modes_are_read(tmp_path, modes, expected):
    assert trained_pooling(st_folder(tmp_path, **modes)) == expected


def test_a_cls_pooled_or_plain_base_gets_no_note(tmp_path, tiny_bert):
    assert pooling_note(st_folder(tmp_path, cls_token=True)) is None
    assert trained_pooling(tiny_bert) is None and pooling_note(tiny_bert) is None
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "modules.json").write_text("[{")  # unreadable: no note, no error
    assert pooling_note(broken) is None
