"""`tunelab baseline`: the probe's head stored and reproducible, one identical measurement only
(unless named), and a baseline that fails or is stopped recorded as such, never left running."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from light_commands import LIGHT_COMMANDS

from conftest import tl
from tunelab.core.lab import open_lab
from tunelab.core.ledger import effective_status
from tunelab.core.store import read_jsonl
from tunelab.modeling.model import load_encoder, load_tokenizer
from tunelab.modeling.probe import HEAD_FILE, features, load_head
from tunelab.stages.baseline import measure as stage


@pytest.fixture
def data_lab(make_lab, capsys):
    lab = make_lab()
    code, _ = tl(capsys, "data", "--lab", str(lab))
    assert code == 0
    return lab


def _statuses(lab) -> dict[str, str]:
    store = open_lab(lab).store
    return {r["id"]: effective_status(r, store.runs_dir / r["id"]) for r in store.runs()}


def test_the_stored_probe_head_reproduces_the_validation_predictions(data_lab, capsys):
    code, out = tl(capsys, "baseline", "--lab", str(data_lab))
    assert code == 0 and [r["id"] for r in out["runs"]] == ["r001-majority", "r002-probe"]
    lab = open_lab(data_lab)
    probe = lab.store.read_record("r002-probe")
    head_path = lab.store.run_dir("r002-probe") / HEAD_FILE
    assert probe["baseline"]["head"]["file"] == HEAD_FILE and head_path.is_file()

    head = load_head(head_path)
    spec, rows = lab.spec, lab.store.read_split(probe["data_version"], "validation")
    tokenizer = load_tokenizer(spec.model, lab.path)
    encoder = load_encoder(spec.model, lab.path, lab.device)
    x = features(
        encoder, tokenizer, rows, head.classes, spec.model.max_length, 16, lab.device
    )  # another batch size than the baseline's: the embedding does not depend on it
    again = head.predictions(rows, x)
    stored = read_jsonl(lab.store.run_dir("r002-probe") / "predictions.jsonl")
    assert [(p["id"], p["predicted"]) for p in again] == [(p["id"], p["predicted"]) for p in stored]
    for a, b in zip(again, stored, strict=True):
        assert a["confidence"] == pytest.approx(b["confidence"], abs=1e-6)
    assert sorted(head.classes) == sorted(lab.store.data_manifest(probe["data_version"])["labels"])


def test_a_second_identical_baseline_is_refused_unless_named(data_lab, capsys):
    lab = str(data_lab)
    assert tl(capsys, "baseline", "--lab", lab)[0] == 0
    code, out = tl(capsys, "baseline", "--lab", lab)
    assert code == 2
    assert "already recorded (r001-majority, r002-probe)" in out["error"]
    assert "--name NAME" in out["error"]
    assert list(_statuses(data_lab)) == ["r001-majority", "r002-probe"]  # nothing added
    # said before torch is imported (6.5 s, where it came after the stage's imports)
    said = subprocess.run(
        [sys.executable, "-c", LIGHT_COMMANDS, json.dumps([["baseline", "--lab", lab]])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(said.stdout.splitlines()[-1]) == [
        {"argv": ["baseline", "--lab", lab], "code": 2, "heavy": []}
    ], said.stderr

    code, out = tl(capsys, "baseline", "--lab", lab, "--name", "again")
    assert code == 0
    assert [r["id"] for r in out["runs"]] == ["r003-majority-again", "r004-probe-again"]
    assert tl(capsys, "baseline", "--lab", lab, "--name", "again")[0] == 2  # that name is taken
    code, out = tl(capsys, "baseline", "--lab", lab, "--name", "x y")  # not a run name
    assert code == 2 and "--name 'x y' (run 'majority-x y') is not allowed" in out["error"]
    assert "(.tunelab/runs/r003-majority-NAME), so it is 1 to 55 letters" in out["error"]
    assert len(_statuses(data_lab)) == 4


def test_another_evaluation_protocol_is_another_measurement(data_lab, capsys):
    lab = str(data_lab)
    assert tl(capsys, "baseline", "--lab", lab)[0] == 0
    code, out = tl(capsys, "baseline", "--lab", lab, "evaluation.batch_size=8")
    assert code == 0 and [r["id"] for r in out["runs"]] == ["r003-majority", "r004-probe"]
    # other rules (a reference compare judges by): it was refused as "adds nothing"
    code, out = tl(capsys, "baseline", "--lab", lab, "hypothesis.min_effect=0.2")
    assert code == 0 and [r["id"] for r in out["runs"]] == ["r005-majority", "r006-probe"], out


def test_a_zero_shot_baseline_from_prompts_tokenised_apart_is_measured_again(
    make_extraction_lab, capsys
):
    """Before prompts were tokenised whole, a record's protocol had no `prompt_tokens`: its
    predictions came from other tokens, so it is not this lab's measurement any more."""
    lab = make_extraction_lab()
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0
    code, out = tl(capsys, "baseline", "--lab", str(lab))
    assert code == 0 and out["runs"][0]["protocol"]["prompt_tokens"] == "whole"
    assert tl(capsys, "baseline", "--lab", str(lab))[0] == 2  # the same measurement: refused
    path = open_lab(lab).store.runs_dir / out["runs"][0]["id"] / "record.json"
    record = json.loads(path.read_text())
    del record["protocol"]["prompt_tokens"]
    path.write_text(json.dumps(record))
    code, again = tl(capsys, "baseline", "--lab", str(lab))
    assert code == 0 and [r["id"] for r in again["runs"]] == ["r002-zero-shot"]
    # before exact_match asked for an answer the format accepts, the same holds of it
    assert again["runs"][0]["protocol"]["exact_match"] == "only in format"
    path = open_lab(lab).store.runs_dir / "r002-zero-shot" / "record.json"
    record = json.loads(path.read_text())
    del record["protocol"]["exact_match"]
    path.write_text(json.dumps(record))
    code, third = tl(capsys, "baseline", "--lab", str(lab))
    assert code == 0 and [r["id"] for r in third["runs"]] == ["r003-zero-shot"]


def test_only_the_missing_baseline_is_measured_again(data_lab, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the solver blew up")

    monkeypatch.setattr(stage, "fit_head", broken)
    code, out = tl(capsys, "baseline", "--lab", str(data_lab))
    assert code == 1 and "RuntimeError: the solver blew up" in out["error"]
    assert _statuses(data_lab) == {"r001-majority": "completed", "r002-probe": "failed"}
    error = open_lab(data_lab).store.read_record("r002-probe")["error"]
    assert "the solver blew up" in error and "Traceback" in error

    monkeypatch.undo()
    code, out = tl(capsys, "baseline", "--lab", str(data_lab))
    assert code == 0 and [r["id"] for r in out["runs"]] == ["r003-probe"]
    assert out["already"] == [{"id": "r001-majority", "method": "majority"}]


def test_ctrl_c_during_the_probe_leaves_it_interrupted_and_exits_130(data_lab, capsys, monkeypatch):
    def stopped(*args, **kwargs):
        raise KeyboardInterrupt("Ctrl-C")

    monkeypatch.setattr(stage, "features", stopped)
    code, out = tl(capsys, "baseline", "--lab", str(data_lab))
    assert code == 130 and "r002-probe is recorded as interrupted" in out["error"]
    assert _statuses(data_lab) == {"r001-majority": "completed", "r002-probe": "interrupted"}


def test_a_failed_zero_shot_baseline_is_failed_not_lost(make_extraction_lab, capsys, monkeypatch):
    lab = make_extraction_lab()
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0

    def broken(*args, **kwargs):
        raise RuntimeError("generation failed")

    monkeypatch.setattr(stage, "evaluate_rows", broken)
    code, _ = tl(capsys, "baseline", "--lab", str(lab))
    assert code == 1 and _statuses(lab) == {"r001-zero-shot": "failed"}
