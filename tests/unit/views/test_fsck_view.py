"""The fsck view names what a marked break forgave and accepted (it read 'forgiving []')."""

from __future__ import annotations

import io

from rich.console import Console

from tunelab.views.fsck import fsck


def test_a_marked_break_names_its_lines_and_records():
    log = {"unchained": 0, "head": "ab" * 32, "breaks": []}
    log["breaks"] = [
        {
            "line": 12,
            "reason": "log lost in a move",
            "forgives": [],
            "accepted": [".tunelab/runs/r003-lora/record.json"],
        }
    ]
    result = {"lab": "/l", "log": log, "checked": {"log_lines": 12}, "problems": []}
    out = io.StringIO()
    fsck(result | {"passed": True, "not_checked": []}, Console(file=out, width=300))
    assert (
        "log line 12: a marked break (log lost in a move): log lines forgiven none; records "
        "accepted as they are .tunelab/runs/r003-lora/record.json" in out.getvalue()
    )
    # a record accepted that was another run's: the run it replaced is said under the break
    log["breaks"][0]["replaced"] = {".tunelab/runs/r003-lora/record.json": "another run's record"}
    out = io.StringIO()
    fsck(result | {"passed": True, "not_checked": []}, Console(file=out, width=300))
    assert "    .tunelab/runs/r003-lora/record.json: another run's record" in out.getvalue()
