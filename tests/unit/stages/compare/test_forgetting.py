"""A forgetting guardrail in compare: paired on the documents of its text, and unresolved (not
checked, naming the run) when a run was never scored there."""

from __future__ import annotations

import math

from tunelab.core.spec import Guardrail
from tunelab.core.store import write_jsonl
from tunelab.stages.compare.forgetting import judge_forgetting
from tunelab.stages.compare.guardrails import describe

RAIL = Guardrail(metric="bits_per_byte", on="g.txt", max_drop=0.05)


class Runs:
    """Run folders under a temporary root, as the store lays them out."""

    def __init__(self, root):
        self.root = root

    def run_dir(self, run_id):
        return self.root / run_id


def scored(runs: Runs, run_id: str, bits: float, kind: str = "variant") -> dict:
    """A run whose 40 documents of 100 bytes each score `bits` per byte (+-2%)."""
    docs = [
        {
            "id": f"d{i}",
            "nll": bits * math.log(2) * 100 * (1 + 0.02 * ((i % 5) - 2)),
            "bytes": 100,
            "tokens": 25,
            "source": "data",
        }
        for i in range(40)
    ]
    (runs.root / run_id / "guard").mkdir(parents=True)
    write_jsonl(runs.root / run_id / "guard" / "g.jsonl", docs)
    return {"id": run_id, "kind": kind, "guard": {"g.txt": {"file": "guard/g.jsonl"}}}


def test_a_rise_past_the_limit_breaks_and_a_small_one_holds(tmp_path):
    runs = Runs(tmp_path)
    base = scored(runs, "r001", 1.00, "baseline")
    fine, worse = scored(runs, "r002", 1.01), scored(runs, "r003", 1.30)
    held = judge_forgetting(RAIL, runs, [base], [fine], (False, True))
    broken = judge_forgetting(RAIL, runs, [base], [worse], (False, True))
    assert held["status"] == "holds" and held["on"] == "g.txt"
    assert broken["status"] == "broken"
    assert broken["checks"]["overall"]["delta"] < -0.05  # a rise is a drop of the negated metric
    words = describe(broken)
    assert words.startswith("bits_per_byte (overall) on g.txt broken: overall +0.3000 (")
    assert words.endswith("; limit +0.05 (a rise)")  # the metric's own change, as it rose


def test_a_run_never_scored_there_leaves_it_unresolved_and_says_which(tmp_path):
    runs = Runs(tmp_path)
    base = scored(runs, "r001", 1.00, "baseline")
    old = {"id": "r002", "kind": "variant"}
    g = judge_forgetting(RAIL, runs, [base], [old], (False, True))
    assert g["status"] == "unresolved" and not g["passed"]
    assert g["checks"]["overall"]["not_checked"] == "r002 was not scored on g.txt"
    assert "not checked (r002 was not scored on g.txt)" in describe(g)


def test_a_hold_on_the_documents_alone_where_the_noise_runs_were_not_scored_is_unresolved(
    tmp_path,
):
    """The primary counted the family's noise runs; this guardrail could not (they predate
    it), so its interval over the documents alone says nothing of a new seed: it read "holds"
    beside a seed-aware "improved"."""
    from tunelab.stages.compare.forgetting import Unmeasured
    from tunelab.stages.compare.rules import _remedy

    def unscored_noise(before, arm, scored_as):
        raise Unmeasured("r007 was not scored on g.txt")

    runs = Runs(tmp_path)
    base = scored(runs, "r001", 1.00, "baseline")
    fine = scored(runs, "r002", 1.01)
    assert judge_forgetting(RAIL, runs, [base], [fine], (False, True))["status"] == "holds"
    g = judge_forgetting(RAIL, runs, [base], [fine], (False, True), unscored_noise)
    check = g["checks"]["overall"]
    assert (g["status"], g["passed"]) == ("unresolved", False)
    assert check["needs"] == "more seeds" and "r007" in check["seeds_unscored"]
    assert "tunelab noise r002 --seeds 3" in _remedy([g], ("r002", 1))
    assert "on the documents alone (r007 was not scored on g.txt" in describe(g)
