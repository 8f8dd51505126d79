"""Bases in Hugging Face's local hub cache: named by their repository id, found offline, and
recorded as that repository at its commit."""

import hashlib
import json
from pathlib import Path

import huggingface_hub.constants
import pytest
import yaml

from conftest import lab_spec, topic_rows
from tunelab.cli import main
from tunelab.core.spec import ModelSpec
from tunelab.modeling.hub_cache import locate
from tunelab.modeling.identity import identity
from tunelab.modeling.model import ModelError, resolve_path

REPO = "sentence-transformers/all-MiniLM-L6-v2"
COMMIT = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"


@pytest.fixture
def hub(tmp_path, tiny_bert, monkeypatch) -> Path:
    """A hub cache holding the tiny BERT as REPO at COMMIT, `main` pointing there: files as
    symlinks into blobs/, as `huggingface_hub` keeps them."""
    cache = tmp_path / "hub"
    repo = cache / ("models--" + REPO.replace("/", "--"))
    snapshot = repo / "snapshots" / COMMIT
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    snapshot.mkdir(parents=True)
    for file in tiny_bert.iterdir():
        blob = repo / "blobs" / hashlib.sha256(file.read_bytes()).hexdigest()
        blob.write_bytes(file.read_bytes())
        (snapshot / file.name).symlink_to(Path("../../blobs") / blob.name)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return snapshot


def test_a_repository_id_is_found_in_the_cache_and_named_by_it(hub, tiny_bert, tmp_path):
    lab = tmp_path / "lab"
    assert locate(ModelSpec(path=REPO), lab) == hub
    assert locate(ModelSpec(path=REPO, revision=COMMIT), lab) == hub
    ident = identity(ModelSpec(path=REPO), lab)
    assert (ident["name"], ident["revision"]) == (REPO, COMMIT)
    plain = identity(ModelSpec(path=str(tiny_bert)), tiny_bert)
    assert ident["weights_sha256"] == plain["weights_sha256"]  # the bytes behind the links
    # a folder of the snapshot named by its path is the same base; a revision label stays
    named = identity(ModelSpec(path=str(hub), revision="v1.0"), lab)
    assert (named["name"], named["revision"]) == (REPO, "v1.0")


def test_a_folder_of_the_lab_comes_before_the_cache(hub, tiny_bert, tmp_path):
    lab = tmp_path / "lab"
    (lab / "sentence-transformers").mkdir(parents=True)
    (lab / REPO).symlink_to(tiny_bert)
    assert locate(ModelSpec(path=REPO), lab) == lab / REPO


def test_what_the_cache_does_not_hold_is_refused_saying_how_to_fetch_it(hub, tmp_path):
    with pytest.raises(ModelError) as missing:
        resolve_path(ModelSpec(path="nobody/nothing"), tmp_path)
    assert "no snapshot of nobody/nothing" in str(missing.value)
    assert "`hf download nobody/nothing`" in str(missing.value)
    with pytest.raises(ModelError, match="at revision 'v9'"):
        resolve_path(ModelSpec(path=REPO, revision="v9"), tmp_path)
    with pytest.raises(ModelError, match=r"no folder .*models/none\. tunelab"):  # a plain path
        resolve_path(ModelSpec(path="./models/none"), tmp_path)


def test_a_lab_on_a_cached_repository_records_it(hub, tmp_path, capsys):
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in topic_rows()))
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(lab_spec(Path(REPO))))
    assert main(["data", "--lab", str(lab), "--json"]) == 0
    capsys.readouterr()
    assert main(["baseline", "--lab", str(lab), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    base = json.loads((lab / ".tunelab/runs" / runs[-1]["id"] / "record.json").read_text())
    assert base["base_model"]["name"] == REPO and base["base_model"]["revision"] == COMMIT


def test_the_template_s_placeholder_is_named_as_one(hub, tmp_path):
    """`tunelab init`'s `models/encoder` was read as a Hub id: 'hf download models/encoder'."""
    with pytest.raises(ModelError) as missing:
        resolve_path(ModelSpec(path="models/encoder"), tmp_path)
    said = str(missing.value)
    assert "is the placeholder `tunelab init` wrote: set it to your base model" in said
    assert "hf download" not in said
