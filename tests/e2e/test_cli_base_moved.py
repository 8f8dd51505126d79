"""A base model moved or changed after a run trained on it: `final`, `noise` and `ablate`
refuse before they record anything. `final` had logged the test split's opening and then
failed to load the model (the one clean look spent); `noise` had opened a seed group (and a
failed run) first; `ablate` had trained its first value before a missing `model.path` value."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from conftest import tl
from tunelab.core.seal import final_accesses
from tunelab.core.store import Store


@pytest.fixture
def trained(make_lab, tiny_bert, capsys):
    """A lab whose base is its own copy (`base/`), with its baselines and a LoRA run compared."""
    lab = make_lab()
    shutil.copytree(tiny_bert, lab / "base")
    spec = yaml.safe_load((lab / "tunelab.yaml").read_text())
    spec["model"]["path"] = "base"
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(spec))
    for command in (["data"], ["baseline"], ["run", "--name", "lora"], ["compare"]):
        assert tl(capsys, *command, "--lab", str(lab))[0] == 0
    return lab


def _events(lab) -> list[str]:
    return [e["event"] for e in Store(lab).events()]


def test_final_refuses_a_moved_base_before_it_opens_the_split(trained, capsys):
    where = ["--lab", str(trained)]
    (trained / "base").rename(trained / "moved")
    before = _events(trained)
    code, err = tl(capsys, "final", "r003-lora", "--reason", "chosen", *where)
    assert code == 2 and "model.path 'base': no config.json" in err["error"], err
    assert "run r003-lora's record" in err["error"]
    assert _events(trained) == before and final_accesses(Store(trained)) == []
    (trained / "moved").rename(trained / "base")  # restored: the first look is still unspent
    code, result = tl(capsys, "final", "r003-lora", "--reason", "chosen", *where)
    assert code == 0 and result["n"] == 1 and not result["repeated"]


def test_final_and_noise_refuse_a_base_with_fewer_positions_before_recording(trained, capsys):
    where = ["--lab", str(trained)]
    config = trained / "base" / "config.json"
    config.write_text(json.dumps(json.loads(config.read_text()) | {"max_position_embeddings": 16}))
    before = _events(trained)
    code, err = tl(capsys, "final", "r003-lora", "--reason", "chosen", *where)
    assert code == 2 and "32 positions, more than the base model's 16" in err["error"], err
    assert "run r003-lora's record" in err["error"]
    assert "put back the base model it trained on" in err["error"]  # its spec cannot change
    code, err = tl(capsys, "noise", "r003-lora", "--seeds", "2", *where)
    assert code == 2 and "32 positions, more than the base model's 16" in err["error"], err
    assert _events(trained) == before  # no opening, no seed group, no failed seed
    assert not (trained / ".tunelab" / "groups").exists()


def test_noise_and_ablate_refuse_a_base_that_is_not_there(trained, capsys):
    where = ["--lab", str(trained)]
    runs = sorted((trained / ".tunelab" / "runs").iterdir())
    code, err = tl(capsys, "ablate", "model.path=base,nowhere", *where)
    assert code == 2 and "model.path 'nowhere': no config.json" in err["error"], err
    (trained / "base").rename(trained / "moved")
    before = _events(trained)
    code, err = tl(capsys, "noise", "r003-lora", "--seeds", "2", *where)
    assert code == 2 and "model.path 'base': no config.json" in err["error"], err
    assert _events(trained) == before
    assert sorted((trained / ".tunelab" / "runs").iterdir()) == runs  # nothing trained


def test_export_refuses_a_base_the_run_no_longer_fits(trained, capsys):
    """It exported (exit 0, a bundle recorded), and `verify` then failed inside the model."""
    where = ["--lab", str(trained)]
    config = trained / "base" / "config.json"
    config.write_text(json.dumps(json.loads(config.read_text()) | {"max_position_embeddings": 16}))
    code, err = tl(capsys, "export", "r003-lora", *where)
    assert code == 2 and "32 positions, more than the base model's 16" in err["error"], err
    assert not (trained / "bundles").exists() and "export" not in _events(trained)
