"""A base model moved or changed after a run trained on it: `final`, `noise` and `ablate`
refuse before they record anything. `final` had logged the test split's opening and then
failed to load the model (the one clean look spent); `noise` had opened a seed group (and a
failed run) first; `ablate` had trained its first value before a missing `model.path` value.
A base whose files changed had gone on to `final`, `resume` and `export`, and the bundle, bound
to the changed base, verified; a moved one stranded the run (`--base` gives its place)."""

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
    assert code == 2, err
    assert f"the base model r003-lora trained on is not at {trained / 'base'}" in err["error"]
    assert "give its place with --base PATH" in err["error"]  # the run's spec cannot change
    assert _events(trained) == before and final_accesses(Store(trained)) == []
    # given its new place, the same base by its sha256: the first look is still unspent
    code, result = tl(
        capsys, "final", "r003-lora", "--reason", "chosen", *where, "--base", str(trained / "moved")
    )
    assert code == 0 and result["n"] == 1 and not result["repeated"], result


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
    assert code == 2 and "model.path 'nowhere': no folder" in err["error"], err
    (trained / "base").rename(trained / "moved")
    before = _events(trained)
    code, err = tl(capsys, "noise", "r003-lora", "--seeds", "2", *where)
    assert code == 2 and "the base model r003-lora trained on is not at" in err["error"], err
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


def test_a_base_whose_weights_changed_is_refused_by_every_command_of_the_run(trained, capsys):
    """One byte of the base's weights flipped at the recorded place: `final` scored the run on
    a base it never trained on, `resume` went on training on it, and `export` bound the bundle
    to it, which `verify` then passed."""
    where = ["--lab", str(trained)]
    weights = trained / "base" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1001] ^= 0x40
    weights.write_bytes(bytes(data))
    before = _events(trained)
    for command in (
        ["final", "r003-lora", "--reason", "x"],
        ["export", "r003-lora"],
        ["noise", "r003-lora", "--seeds", "2"],
    ):
        code, err = tl(capsys, *command, *where)
        assert code == 2, (command, err)
        assert "r003-lora was trained on a base model whose weights hash to" in err["error"]
        assert "model.safetensors changed since" in err["error"], err
    assert _events(trained) == before and not (trained / "bundles").exists()
    # a run that trains on it anew is a new base against its parent, said as such
    code, run = tl(capsys, "run", "--name", "again", "--parent", "r003-lora", *where)
    assert code == 0, run
    (change,) = run["diff"]["model"]
    assert change["key"] == "base weights sha256"


def test_export_with_base_binds_the_bundle_to_where_the_base_is_now(trained, capsys, tmp_path):
    where = ["--lab", str(trained)]
    moved = tmp_path / "elsewhere"
    (trained / "base").rename(moved)
    code, err = tl(capsys, "export", "r003-lora", *where)
    assert code == 2 and "--base PATH" in err["error"], err
    code, err = tl(capsys, "export", "r003-lora", *where, "--base", str(tmp_path / "nowhere"))
    assert code == 2 and err["error"].startswith(f"--base {tmp_path / 'nowhere'}: no base model")
    assert "(no such folder)" in err["error"]  # what was typed, not "where its record says"
    code, bundle = tl(capsys, "export", "r003-lora", *where, "--base", str(moved))
    assert code == 0, bundle
    assert bundle["base_model"]["path"] == str(moved)
    code, checked = tl(capsys, "verify", bundle["bundle"])
    assert code == 0 and checked["passed"], checked


def test_a_bundle_of_a_base_inside_its_lab_verifies_after_the_lab_moved(trained, capsys, tmp_path):
    """`model.path: base`, relative: the bundle recorded the base's absolute path, and once the
    lab moved `verify` failed and wrote that failure over the export's pass."""
    code, bundle = tl(capsys, "export", "r003-lora", "--lab", str(trained))
    assert code == 0, bundle
    moved = tmp_path / "moved lab"
    trained.rename(moved)
    code, checked = tl(capsys, "verify", str(moved / "bundles" / "r003-lora"))
    assert code == 0 and checked["passed"], checked
    assert checked["base"] == str(moved / "base") and checked["recorded"]


def test_a_copied_lab_s_bundle_is_verified_against_the_copy_s_own_base(trained, capsys, tmp_path):
    """The recorded absolute path still named the original lab's base: edited there, the copy
    recorded NOT VERIFIED for a bundle whose own base was untouched."""
    code, bundle = tl(capsys, "export", "r003-lora", "--lab", str(trained))
    assert code == 0, bundle
    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    weights = trained / "base" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1001] ^= 0x40
    weights.write_bytes(bytes(data))
    code, checked = tl(capsys, "verify", str(copy / "bundles" / "r003-lora"))
    assert code == 0 and checked["passed"] and checked["base"] == str(copy / "base"), checked
