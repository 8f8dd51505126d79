"""A lab with its data and baselines, and the CLI as the `final` tests call it."""

from __future__ import annotations

import json

import pytest

from tunelab.cli import main

FOR_REPORT = "the baseline's test figure, for the report"


def cli(capsys, *args: str) -> dict | list:
    code = main([*args, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    return out


@pytest.fixture
def lab_with_baselines(make_lab, capsys):
    lab = make_lab()
    report = cli(capsys, "data", "--lab", str(lab))
    cli(capsys, "baseline", "--lab", str(lab))
    return lab, report
