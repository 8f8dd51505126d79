"""The rules a comparison judges by: the hypothesis and guardrails recorded with its reference
run, never today's spec (a verdict cannot be changed after the fact), and which runs were
recorded under other rules."""

from __future__ import annotations

from tunelab.core.sections import recorded_rules
from tunelab.core.spec import Guardrail, Hypothesis


def frozen_rules(record: dict) -> tuple[Hypothesis | None, list[Guardrail]]:
    """The hypothesis and guardrails a run was recorded under (its resolved spec)."""
    spec = record.get("spec") or {}
    raw = spec.get("hypothesis")
    return (
        Hypothesis(**raw) if raw else None,
        [Guardrail(**g) for g in spec.get("guardrails") or []],
    )


def rule_differences(reference: dict, runs: list[dict]) -> dict[str, list[str]]:
    """Per run, the frozen fields (`hypothesis.min_effect`, `guardrails`) that differ from the
    reference's record."""
    ref = reference.get("spec") or {}
    out = {}
    for run in runs:
        spec = run.get("spec") or {}
        fields = []
        ra, rb = recorded_rules(ref), recorded_rules(spec)
        ha, hb = ra["hypothesis"] or {}, rb["hypothesis"] or {}
        fields += [f"hypothesis.{k}" for k in sorted(set(ha) | set(hb)) if ha.get(k) != hb.get(k)]
        if ra["guardrails"] != rb["guardrails"]:
            fields.append("guardrails")
        if fields:
            out[run["id"]] = fields
    return out


def spec_rules_note(spec, reference: dict) -> str | None:
    """What to say when today's `tunelab.yaml` states other rules than the reference was
    recorded under: compare goes on by the recorded ones, and says how to judge by the new."""
    today = {"id": "", "spec": spec.model_dump(mode="json")}
    fields = rule_differences(reference, [today]).get("")
    if not fields:
        return None
    return (
        f"tunelab.yaml's rules changed since the reference {reference['id']} was recorded "
        f"({', '.join(fields)}): compare judges by the recorded ones (a verdict cannot change "
        "after the fact). To judge by the spec's, "
        "record a reference under them (`tunelab baseline`) and train the variants "
        "under that spec."
    )
