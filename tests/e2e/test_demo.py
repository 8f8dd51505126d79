"""The front door: the embedded demos on the real models they ship with (slow, run in CI)."""

from __future__ import annotations

import json

import pytest

from tunelab.cli import main


@pytest.mark.slow
def test_classification_demo_tells_the_whole_story(tmp_path, capsys):
    lab = tmp_path / "classification"
    assert main(["demo", "classification", "--dir", str(lab), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    data = result["data"]
    assert data["rows_read"] == 2225
    assert data["rows_read"] == data["kept"] + data["quarantined"] + data["duplicates_removed"]
    assert data["duplicates_removed"] > 50  # BBC News repeats many articles
    runs = {r["id"].split("-", 1)[1]: r for r in result["compare"]["runs"]}
    assert set(runs) == {"majority", "probe", "lora", "full"}
    assert runs["lora"]["macro_f1"] > runs["majority"]["macro_f1"] + 0.5
    assert runs["lora"]["verdict"] in {"improved", "no evidence", "guardrail broken"}
    assert (lab / ".tunelab" / "runs").is_dir()
