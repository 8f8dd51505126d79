"""Which spec the report shows, and a sentence saying where it comes from.

The page is read from the records, so its spec is one a run recorded, not today's
`tunelab.yaml` (edited after the runs, it would put rules beside verdicts that were not judged
by them): the spec of the newest comparison's reference, whose hypothesis and guardrails its
verdicts were judged by; without a comparison, the newest run's (an invalidated one only
when no other recorded a spec); without a run, the current one.
"""

from __future__ import annotations

from typing import Any

from tunelab.core.sections import Compass


def recorded_spec(records: list[dict], comparisons: list[dict], today: dict) -> dict[str, Any]:
    """`spec`: the spec to show (as a dict); `note`: where it comes from, in words (commands
    and ids in backticks)."""
    by_id = {r["id"]: r for r in records if r.get("spec")}
    if comparisons:
        newest = comparisons[-1]
        reference = (newest.get("rules") or {}).get("from") or newest.get("reference")
        if reference in by_id:
            note = (
                f"As recorded with run `{reference}`, the reference of comparison "
                f"`{newest.get('id')}`: the rules its verdicts were judged by."
            )
            return {"spec": _complete(by_id[reference]["spec"]), "note": note}
    valid = [r for r in by_id.values() if r.get("status") != "invalid"]
    if valid or by_id:
        newest_run = (valid or list(by_id.values()))[-1]
        note = (
            f"As recorded with run `{newest_run['id']}`, the newest run. A comparison judges by "
            "the hypothesis and guardrails recorded with its reference."
        )
        return {"spec": _complete(newest_run["spec"]), "note": note}
    note = "From the current `tunelab.yaml`: no run has recorded a spec yet."
    return {"spec": today, "note": note}


def _complete(spec: dict) -> dict:
    """A recorded spec with the sections the page reads; a run recorded before the spec had a
    compass shows the default one."""
    return {"compass": Compass().model_dump(mode="json")} | spec
