"""`tunelab size --nproc 2 --strategy fsdp`: one rank's step measured in two real processes
under torchrun (gloo on CPU), beside the per-rank estimate, and the advice over 2 processes."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from tunelab.cli import main
from tunelab.views import size as view

pytestmark = pytest.mark.slow


def test_size_measures_every_rank_of_two_fsdp_processes(make_extraction_lab, capsys):
    lab = make_extraction_lab(method={"type": "full"})  # global batch 4, microbatch 2
    assert main(["data", "--lab", str(lab), "--json"]) == 0
    capsys.readouterr()
    argv = ["size", "--lab", str(lab), "--nproc", "2", "--strategy", "fsdp", "--seq-len", "32"]
    code = main([*argv, "--json"])
    r = json.loads(capsys.readouterr().out)
    assert code == 0, r
    p = r["processes"]
    assert (p["nproc"], p["strategy"], p["accumulation_per_rank"]) == (2, "fsdp", 1)
    assert [x["rank"] for x in p["ranks"]] == [0, 1]
    assert all(x["measured_peak_mb"] > 0 and x["peak_reset"] for x in p["ranks"])
    assert p["max_peak_mb"] == max(x["measured_peak_mb"] for x in p["ranks"])
    assert p["fsdp"]["units"] == "2 LlamaDecoderLayer + the root"
    e = p["estimate"]
    assert e["peak_mb"] > 0 and e["terms_mb"]["gathered_unit"] > 0
    assert e["terms_mb"]["weights_shard"] > 0 and isinstance(p["error_pct"], float)
    a = r["advice"]
    assert a["fits"] and a["processes"] == 2
    assert a["microbatch"] * a["accumulation"] * a["processes"] == 4
    out = Console(file=io.StringIO(), width=160)
    view.size(r | {"file": r["file"]}, out)
    assert "fsdp × 2 processes" in out.file.getvalue()
