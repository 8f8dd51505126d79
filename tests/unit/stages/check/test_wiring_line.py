"""The one line `ablate --check` and the demos print for a check of new wiring: what it did
not check and what it warned of are said there, not only kept in its record."""

from __future__ import annotations

import io

from rich.console import Console

from tunelab.stages.check import steps


def test_a_passed_check_says_what_it_did_not_check_and_its_warnings(monkeypatch):
    """The image demo printed "passed in 13s (11 items)" for a check whose loss item was not
    checked and whose record warned that the probe's start broke in training mode; the run then
    trained for two minutes from that start."""
    items = [{"name": "render", "passed": True}, {"name": "loss", "passed": False}]
    items[1]["not_checked"] = True
    result = {"passed": True, "failed": [], "skipped": [], "items": items, "seconds": 13.2}
    result |= {"file": ".tunelab/checks/x.json", "warnings": ["head_init: the start broke"]}
    monkeypatch.setattr(steps, "check_status", lambda lab, version: {"warning": "none yet"})
    monkeypatch.setattr(steps, "run_check", lambda lab, console: result)
    lab = type("Lab", (), {"data_version": "v1"})()
    out = io.StringIO()
    steps.wiring_checked(lab, Console(file=out, width=200))
    said = out.getvalue()
    assert "passed in 13s (2 items, 1 not checked: loss; .tunelab/checks/x.json)" in said
    assert "warning head_init: the start broke" in said
