"""A base folder's files read whole before anything is recorded: a damaged config.json or
safetensors file, or an image lab's base without its preprocessing file, is refused naming the
file; `baseline` met each as an internal error after recording its majority class."""

from __future__ import annotations

import json
import shutil

import pytest

from tunelab.cli import main
from tunelab.modeling.whole_files import DamagedModelError, require_whole, safetensors_problem


@pytest.fixture
def copy(tiny_bert, tmp_path):
    return shutil.copytree(tiny_bert, tmp_path / "bert")


def test_a_whole_folder_passes_and_each_damage_is_named(copy):
    require_whole(copy, "model.path")
    weights = copy / "model.safetensors"
    whole = weights.read_bytes()
    assert safetensors_problem(weights) is None

    weights.write_bytes(whole[:-10])  # a copy cut short
    with pytest.raises(DamagedModelError, match="cut short or padded: its header places"):
        require_whole(copy, "model.path")
    weights.write_bytes(whole + b"\0")
    assert "the file has" in safetensors_problem(weights)
    weights.write_bytes(whole[:1000])  # cut inside the header
    assert safetensors_problem(weights).startswith("not a safetensors file (header of")
    weights.write_bytes(b"\x10" + b"\0" * 7 + b"{not json}......")
    assert "its header" in safetensors_problem(weights)
    weights.write_bytes(whole)

    config = copy / "config.json"
    config.write_text(config.read_text()[:20])
    with pytest.raises(DamagedModelError) as err:
        require_whole(copy, "model.path 'bert'")
    said = str(err.value)
    assert said.startswith(f"{config}: not valid JSON") and "point model.path 'bert' at" in said


def test_an_image_lab_s_base_needs_its_preprocessing_file(copy):
    with pytest.raises(DamagedModelError, match=r"has no preprocessor_config\.json, so it is not"):
        require_whole(copy, "model.path", images=True)
    (copy / "preprocessor_config.json").write_text(json.dumps({"size": 32}))
    require_whole(copy, "model.path", images=True)


@pytest.mark.parametrize("command", ["baseline", "inspect", "check"])
def test_a_damaged_base_is_refused_before_anything_is_recorded(make_lab, copy, capsys, command):
    lab = make_lab()
    assert main(["data", "--lab", str(lab), "--json"]) == 0
    capsys.readouterr()
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-10])
    code = main([command, "--lab", str(lab), f"model.path={copy}", "--json"])
    said = json.loads(capsys.readouterr().out)
    assert code == 2 and not said["internal"], said
    assert said["error"].startswith(f"{weights}: cut short or padded")
    assert not (lab / ".tunelab" / "runs").exists() or not any(
        (lab / ".tunelab" / "runs").iterdir()
    )
