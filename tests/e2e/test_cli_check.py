"""`tunelab check` through the CLI on the tiny classification lab, and `tunelab run`'s warning
when no passing check exists for the spec and data version it trains on."""

from __future__ import annotations

import re

from test_cli import tl

from tunelab.cli import main


def test_check_fails_then_passes_and_run_knows(make_lab, capsys):
    lab = str(make_lab())
    assert tl(capsys, "data", "--lab", lab)[0] == 0

    # a target that matches nothing: exit 1, and the item names the modules that exist
    code, bad = tl(capsys, "check", "--lab", lab, "method.target_modules=[nope]")
    assert code == 1 and not bad["passed"] and bad["failed"] == ["targets"]
    (targets,) = [i for i in bad["items"] if i["name"] == "targets"]
    assert "nope" in targets["detail"] and "query" in targets["modules"]

    # the human view shows the checklist and the verdict
    assert main(["check", "--lab", lab, "method.target_modules=[nope]"]) == 1
    human = capsys.readouterr().out
    assert "FAILED" in human and "targets" in human and "query" in human
    assert re.search(r"targets .* \d+\.\ds *$", human, re.M)  # a step's seconds, on its line

    # no check of this spec yet: the run says so, in its record
    code, first = tl(capsys, "run", "--lab", lab, "--name", "unchecked")
    assert code == 0 and "no `tunelab check`" in first["preflight"]["warning"]

    code, good = tl(capsys, "check", "--lab", lab, "--rows", "12")
    assert code == 0 and good["passed"] and good["failed"] == []
    assert good["slice"] == {"train": 12, "validation": 3}
    assert [i["name"] for i in good["items"] if i["passed"]][-1] == "reload"
    assert good["trainable"]["trainable_params"] > 0 and good["env"]["packages"]["torch"]

    # an lr change is not a wiring change: the same check covers it
    code, second = tl(capsys, "run", "--lab", lab, "--name", "checked", "training.lr=1e-3")
    assert code == 0 and second["preflight"]["passed"] is True
    assert second["preflight"]["warning"] is None and second["preflight"]["file"] == good["file"]

    # a switch that changes which code runs is not: the run names it against the last check
    code, third = tl(
        capsys, "run", "--lab", lab, "--name", "grouped", "training.group_by_length=true"
    )
    assert code == 0 and third["preflight"]["passed"] is None
    warning = third["preflight"]["warning"]
    assert good["file"] in warning and "training.group_by_length false, now true" in warning
