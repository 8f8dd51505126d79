"""The CLI's contract: light to import, user errors exit 2 in one line, bugs exit 1 with the
traceback on request, the device chosen in one place."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tunelab.cli import COMMANDS, build_parser, main
from tunelab.core.env import pick_device
from tunelab.core.errors import TunelabError
from tunelab.core.store import Store


def test_importing_the_cli_loads_neither_torch_nor_transformers():
    code = (
        "import sys, tunelab.cli; "
        "print(sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_each_command_declares_its_own_arguments():
    parser = build_parser()
    size = parser.parse_args(["size", "--seq-len", "64", "training.lr=1e-4"])
    assert (size.seq_len, size.overrides, size.device) == (64, ["training.lr=1e-4"], None)
    with pytest.raises(SystemExit):
        parser.parse_args(["runs", "--seq-len", "64"])  # not an argument of `runs`
    assert {n for n, c in COMMANDS.items() if c.device} >= {"run", "check", "size", "final"}


def _broken_runs(self):
    raise KeyError("a bug, not the user's input")


def test_an_internal_error_is_one_line_without_debug_and_a_traceback_with_it(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(Store, "runs", _broken_runs)
    monkeypatch.delenv("TUNELAB_DEBUG", raising=False)
    assert main(["runs", "--lab", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "internal error: KeyError" in err and "--debug" in err and "Traceback" not in err
    assert main(["runs", "--lab", str(tmp_path), "--debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "_broken_runs" in err
    monkeypatch.setenv("TUNELAB_DEBUG", "1")
    assert main(["runs", "--lab", str(tmp_path), "--json"]) == 1
    out = capsys.readouterr()
    assert json.loads(out.out)["internal"] is True and "Traceback" in out.err


def test_a_plain_value_error_from_a_bug_is_not_read_as_a_usage_error(tmp_path, monkeypatch, capsys):
    def broken(self):
        raise ValueError("int('x') somewhere deep")

    monkeypatch.setattr(Store, "runs", broken)
    assert main(["runs", "--lab", str(tmp_path), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["internal"] is True


def test_the_device_is_asked_for_once_and_refused_when_absent(monkeypatch):
    monkeypatch.delenv("TUNELAB_DEVICE", raising=False)
    assert pick_device("cpu").type == "cpu"
    monkeypatch.setenv("TUNELAB_DEVICE", "cpu")
    assert pick_device().type == "cpu"
    monkeypatch.setenv("TUNELAB_DEVICE", "potato")
    with pytest.raises(TunelabError, match="TUNELAB_DEVICE 'potato' is not a device name"):
        pick_device()
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(TunelabError, match="--device 'cuda:1': this machine has 0 CUDA"):
            pick_device("cuda:1")


def test_a_bad_device_on_the_command_line_exits_2(make_lab, capsys):
    lab = make_lab()
    assert main(["data", "--lab", str(lab), "--json"]) == 0
    capsys.readouterr()
    assert main(["check", "--lab", str(lab), "--device", "potato", "--json"]) == 2
    assert "--device 'potato'" in json.loads(capsys.readouterr().out)["error"]
