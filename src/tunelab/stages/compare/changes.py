"""What changed since the last comparison: a run whose verdict is not the one the newest earlier
comparison on the same data version gave it, and why, as far as the two records say.

A verdict is a claim, so a claim that turns says so: the same lab compared again by a newer
tunelab read "guardrail unresolved" where the older one had printed "improved", and nothing on
the screen said the word had changed. The reasons are read off the records' own rules: another
reference, other noise records, another arm of seeds, another hypothesis or guardrails, other
rule texts; with none of those, the same runs under the same rule texts are judged otherwise by
this tunelab's code.
"""

from __future__ import annotations

from collections.abc import Iterable

RULE_TEXTS = ("verdict_rule", "guardrail_rule", "seed_rule")


def verdict_changes(newest_first: Iterable[dict], result: dict, rules: dict) -> list[dict]:
    """Each run of `result` (a comparison being written, with its `rules`) whose verdict differs
    from the newest earlier comparison on its data version (`newest_first`: the lab's, read
    lazily, so that only those newer than it are read: each can be megabytes)."""
    version = result["data_version"]
    last = next((c for c in newest_first if c.get("data_version") == version), None)
    if last is None:
        return []
    before = {r["id"]: r for r in last.get("runs", []) if r.get("verdict")}
    return [
        {
            "run": row["id"],
            "was": before[row["id"]]["verdict"],
            "now": row["verdict"],
            "comparison": last["id"],
            "why": _why(last, result, rules, before[row["id"]], row),
        }
        for row in result["runs"]
        if row.get("verdict")
        and row["id"] in before
        and before[row["id"]]["verdict"] != row["verdict"]
    ]


def _sources(row: dict) -> list[str]:
    """What a row's judged interval counted of the seeds' noise (its arms, noise records)."""
    seeds = ((row.get("vs_reference") or {}).get("bootstrap") or {}).get("seeds") or {}
    return sorted(seeds.get("sources") or [])


def _why(last: dict, result: dict, rules: dict, was: dict, row: dict) -> str:
    old, run = last.get("rules") or {}, row["id"]
    why = []
    if last.get("reference") != result["reference"]:
        why.append(f"the reference is {result['reference']} (was {last.get('reference')})")
    if (old.get("hypothesis"), old.get("guardrails")) != (rules["hypothesis"], rules["guardrails"]):
        why.append("the hypothesis or guardrails differ")
    if _sources(was) != _sources(row):  # this row's own, not the comparison's every record
        why.append(
            f"the seeds' noise its interval counts: {', '.join(_sources(row)) or 'none'} "
            f"(was {', '.join(_sources(was)) or 'none'})"
        )
    seeds, had = len(rules["arms"].get(run, [run])), len((old.get("arms") or {}).get(run, [run]))
    if seeds != had:
        why.append(f"its arm has {seeds} seed(s) (had {had})")
    if any(old.get(k) != rules[k] for k in RULE_TEXTS if k in old):
        why.append("the rule texts differ (another tunelab's)")
    return "; ".join(why) or (
        "the same runs under the same rule texts: this tunelab judges them otherwise (a fix "
        "to how intervals or guardrails are computed)"
    )
