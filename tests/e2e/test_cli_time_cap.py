"""A time budget (`training.budget.seconds`) through the CLI: the run ends after the step that
passes it, completes and is evaluated, and says, in its output and its record, what the cap
cut short; `plan` times a variant by the cap."""

from __future__ import annotations

from conftest import tl
from tunelab.cli import main

CAPPED = {"lr": 5e-3, "global_batch": 8, "microbatch": 4, "seed": 0}


def test_a_run_under_a_time_cap_says_what_it_cut(make_lab, capsys):
    lab = make_lab(training=CAPPED | {"budget": {"steps": 50, "seconds": 1e-9}})
    where = ["--lab", str(lab)]
    assert tl(capsys, "data", *where)[0] == 0
    assert main(["run", *where, "--name", "capped"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "warning training.budget.seconds 1e-09 ended training after step 1 of the 50" in shown
    code, runs = tl(capsys, "runs", *where)
    (run,) = runs
    assert code == 0 and run["status"] == "completed"
    code, plan = tl(capsys, "plan", *where)
    assert code == 0, plan
    assert any(
        w.startswith("training.budget.seconds 1e-09 ends each variant") for w in plan["warnings"]
    )
