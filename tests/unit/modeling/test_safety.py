"""Remote code stays local: a trusted model's Python files are copied into the lab's store,
not the user's home cache, and an `auto_map` naming a Hub repository is refused before any
load (it would fetch that repository's code)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
import transformers.dynamic_module_utils as dynamic
from transformers.utils import hub

from tunelab.core.spec import ModelSpec
from tunelab.modeling.model import load_encoder
from tunelab.modeling.safety import ModelFolderError, RemoteCodeWarning, check_auto_map

CONFIGURATION = """\
from transformers import BertConfig


class TinyRemoteConfig(BertConfig):
    model_type = "tiny-remote"
"""
MODELING = """\
from transformers import BertModel

from .configuration_tiny_remote import TinyRemoteConfig


class TinyRemoteModel(BertModel):
    config_class = TinyRemoteConfig
"""


def remote_model(tiny_bert: Path, folder: Path, auto_map: dict) -> Path:
    """A copy of the tiny BERT whose config names classes in its own Python files."""
    shutil.copytree(tiny_bert, folder)
    (folder / "configuration_tiny_remote.py").write_text(CONFIGURATION)
    (folder / "modeling_tiny_remote.py").write_text(MODELING)
    config = json.loads((folder / "config.json").read_text())
    config |= {"model_type": "tiny-remote", "auto_map": auto_map}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


CPU = torch.device("cpu")
LOCAL = {
    "AutoConfig": "configuration_tiny_remote.TinyRemoteConfig",
    "AutoModel": "modeling_tiny_remote.TinyRemoteModel",
}


@pytest.fixture
def modules_cache_restored(monkeypatch):
    """The process-wide settings a trusted load changes, put back after the test."""
    monkeypatch.setattr(dynamic, "HF_MODULES_CACHE", dynamic.HF_MODULES_CACHE)
    monkeypatch.setattr(sys, "path", list(sys.path))


def test_remote_code_is_copied_into_the_labs_store(tiny_bert, tmp_path, modules_cache_restored):
    lab = tmp_path / "lab"
    (lab / ".tunelab").mkdir(parents=True)
    name = f"tiny_remote_{tmp_path.name}"  # the name transformers files the module under
    folder = remote_model(tiny_bert, tmp_path / name, LOCAL)
    spec = ModelSpec(path=str(folder), trust_remote_code=True)
    with pytest.warns(RemoteCodeWarning):
        model = load_encoder(spec, lab, CPU)
    assert type(model).__name__ == "TinyRemoteModel"
    assert type(model).__module__.startswith("transformers_modules.")
    cache = lab / ".tunelab" / "cache" / "modules"
    copied = {p.name for p in cache.rglob("*.py") if not p.name.startswith("__")}
    assert copied == {"configuration_tiny_remote.py", "modeling_tiny_remote.py"}
    assert str(cache.resolve()) == dynamic.HF_MODULES_CACHE  # what transformers reads
    home = Path(hub.HF_MODULES_CACHE) / dynamic.TRANSFORMERS_DYNAMIC_MODULE_NAME / name
    assert not home.exists()  # nothing went to the user's home cache

    # another lab in the same process: its copies import from its own store
    other = tmp_path / "other-lab"
    (other / ".tunelab").mkdir(parents=True)
    again = remote_model(tiny_bert, tmp_path / f"{name}_again", LOCAL)
    with pytest.warns(RemoteCodeWarning):
        model = load_encoder(ModelSpec(path=str(again), trust_remote_code=True), other, CPU)
    assert type(model).__name__ == "TinyRemoteModel"
    assert list((other / ".tunelab" / "cache" / "modules").rglob("modeling_tiny_remote.py"))


@pytest.mark.parametrize(
    ("file", "auto_map", "field"),
    [
        (
            "config.json",
            LOCAL | {"AutoModel": "someone/tiny-remote--modeling_tiny_remote.TinyRemoteModel"},
            "auto_map.AutoModel",
        ),
        (
            "tokenizer_config.json",
            {"AutoTokenizer": ["someone/tok--tokenization.Slow", None]},
            "auto_map.AutoTokenizer",
        ),
    ],
)
def test_an_auto_map_naming_a_hub_repository_is_refused_before_loading(
    tiny_bert, tmp_path, modules_cache_restored, monkeypatch, file, auto_map, field
):
    folder = remote_model(tiny_bert, tmp_path / "remote", LOCAL)
    raw = json.loads((folder / file).read_text())
    (folder / file).write_text(json.dumps(raw | {"auto_map": auto_map}))

    def fetch(*args, **kwargs):
        raise AssertionError("transformers was asked for remote code")

    monkeypatch.setattr(dynamic, "get_class_from_dynamic_module", fetch)
    spec = ModelSpec(path=str(folder), trust_remote_code=True)
    with pytest.raises(ModelFolderError) as err:
        load_encoder(spec, tmp_path, CPU)
    message = str(err.value)
    assert str(folder / file) in message and field in message and "someone/" in message
    assert "model.trust_remote_code: false" in message


def test_a_local_auto_map_passes_the_check(tiny_bert, tmp_path):
    check_auto_map(remote_model(tiny_bert, tmp_path / "remote", LOCAL))


def test_a_base_only_its_own_code_can_load_is_refused_naming_trust_remote_code(
    tiny_bert, tmp_path, make_lab, capsys
):
    """It failed inside transformers, as an internal error (exit 1)."""
    from conftest import tl

    folder = remote_model(tiny_bert, tmp_path / "remote", LOCAL)
    lab = make_lab(model={"path": str(folder), "max_length": 64})
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0
    code, out = tl(capsys, "baseline", "--lab", str(lab))
    assert code == 2 and "model_type 'tiny-remote'" in out["error"], out
    assert "runs only with model.trust_remote_code: true" in out["error"]
