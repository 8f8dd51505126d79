"""Forgetting guardrails in `compare`: the arms paired on the documents of a guardrail's text.

A guardrail `on` a text (`data/guard_sets.py`) is judged like every other guardrail, on the
paired bootstrap of its metric (bits per byte or loss, negated so that a rise is a drop) over
the documents of that text that both arms were scored on (`training/forgetting.py`), with the
seeds' noise when the family's noise runs were scored there too. A run that was not scored
there (made before the guardrail, on a version that shares only the validation split) leaves
the guardrail unresolved, saying which run: a check that did not run never holds. Nor does one
judged on the documents alone where the noise runs, which the primary's interval counts, were
not scored on the text: the seeds' part of it was not measured (`needs: more seeds`).
"""

from __future__ import annotations

from tunelab.core.spec import Guardrail
from tunelab.core.store import read_jsonl
from tunelab.stages.compare.guardrails import UNRESOLVED, judge
from tunelab.stages.compare.pairs import make_arms


class Unmeasured(Exception):
    """A run has no scores on the forgetting set."""


def scored_documents(store, record: dict, on: str) -> dict[str, dict]:
    """A run's scored documents on the forgetting set `on`, by id."""
    entry = (record.get("guard") or {}).get(on)
    if entry is None:
        raise Unmeasured(f"{record['id']} was not scored on {on}")
    return {p["id"]: p for p in read_jsonl(store.run_dir(record["id"]) / entry["file"])}


def judge_forgetting(
    g: Guardrail,
    store,
    before: list[dict],
    arm: list[dict],
    trained: tuple[bool, bool],
    noise_for=None,
) -> dict:
    """The guardrail `g` (with `on`) on the reference's arm `before` and the run's `arm` (run
    records, the first seed first); `noise_for(before, arm, scored)`: the family's noise arms
    (`Arms.noise_for`), when the pair counts the seeds' noise."""
    try:
        ref = [scored_documents(store, r, g.on) for r in before]
        run = [scored_documents(store, r, g.on) for r in arm]
    except Unmeasured as why:
        return unmeasured(g, str(why))
    noise, unscored = (), None
    if noise_for is not None:
        try:
            noise = noise_for(
                before, arm, lambda run_id: scored_documents(store, store.read_record(run_id), g.on)
            )
        except Unmeasured as why:  # the noise runs predate the guardrail: the examples alone
            noise, unscored = (), str(why)
    pair = make_arms(ref, run, [], (before[0]["id"], arm[0]["id"]), trained, noise)
    judged = {**judge(g, pair, None), "on": g.on}
    return _seeds_unmeasured(judged, unscored) if unscored else judged


def _seeds_unmeasured(judged: dict, why: str) -> dict:
    """A guardrail that held on the documents alone where the family's noise runs, which the
    primary metric's interval counts, were not scored on its text: how far a new seed moves it
    is not measured, so it does not hold beside a seed-aware verdict (it had read "holds"
    on an interval a tenth as wide as the seeds' noise made the primary's). More seeds of the
    run, scored there as they train, measure it."""
    checks = {
        name: c | {"status": UNRESOLVED, "needs": "more seeds", "seeds_unscored": why}
        if c.get("status") == "holds" and "basis" not in c
        else c
        for name, c in judged["checks"].items()
    }
    if checks == judged["checks"]:
        return judged
    statuses = {c["status"] for c in checks.values()}
    status = "broken" if "broken" in statuses else UNRESOLVED
    return judged | {"checks": checks, "status": status, "passed": False}


def unmeasured(g: Guardrail, why: str) -> dict:
    check = {"status": UNRESOLVED, "not_checked": why}
    return {
        "metric": g.metric,
        "scope": g.scope,
        "on": g.on,
        "max_drop": g.max_drop,
        "status": UNRESOLVED,
        "passed": False,
        "worst": "overall",
        "checks": {"overall": check},
    }
