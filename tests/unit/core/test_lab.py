"""Opening a lab: the checks a command needs run before the device is picked (and so before
torch is imported), and the lab says where a spec field's value comes from."""

from __future__ import annotations

import pytest
import yaml

from tunelab.core import lab as lab_module
from tunelab.core.errors import TunelabError
from tunelab.core.lab import open_lab, open_records_lab

SPEC = {
    "data": {"sources": [{"type": "jsonl", "path": "d.jsonl"}]},
    "model": {"path": "m"},
    "training": {"lr": 0.005},
}


@pytest.fixture
def lab_dir(tmp_path):
    (tmp_path / "tunelab.yaml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    return tmp_path


def test_checks_run_before_the_device_is_picked(lab_dir, monkeypatch):
    seen = []
    monkeypatch.setattr(lab_module, "pick_device", lambda name: seen.append(("device", name)))
    lab = open_lab(lab_dir, {}, "cpu", [lambda lab: seen.append(("check", lab.device))])
    assert seen == [("check", None), ("device", "cpu")]
    assert lab.path == lab_dir.resolve()


def test_a_check_that_refuses_stops_before_the_device(lab_dir, monkeypatch):
    def refuse(lab):
        raise TunelabError("refused")

    def no_device(name):
        raise AssertionError("the device was picked after a refusal")

    monkeypatch.setattr(lab_module, "pick_device", no_device)
    with pytest.raises(TunelabError, match="refused"):
        open_lab(lab_dir, checks=[refuse])


def test_the_lab_says_where_a_field_comes_from(lab_dir):
    lab = open_records_lab(lab_dir, {"method.r": 4})
    assert lab.device is None and lab.spec.method.r == 4
    assert lab.where("method.r") == "method.r=4 (command line)"
    lines = (lab_dir / "tunelab.yaml").read_text().splitlines()
    assert lab.where("training.lr") == f"tunelab.yaml line {lines.index('  lr: 0.005') + 1}"
    assert lab.where("evaluation.batch_size") == "the default"
