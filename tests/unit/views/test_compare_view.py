"""The compare view's words for a newcomer: the group a per-class guardrail is judged by, the
minimum effect in the table's units, and what a variant changed against its parent."""

from __future__ import annotations

import io

from rich.console import Console

from tunelab.views.compare import _effect, _variant_notes, guardrail_line


def test_a_per_class_guardrail_names_the_class_it_is_judged_by():
    """It read 'worst entertainment -0.2', beside a table whose largest drop was sports."""
    checks = {
        "entertainment": {"delta": -0.002, "low": -0.047, "high": 0.044},
        "sports": {"delta": -0.014, "low": -0.033, "high": 0.0},
    }
    rail = {"metric": "f1", "scope": "every_class", "max_drop": 0.03, "status": "unresolved"}
    line = guardrail_line(rail | {"worst": "entertainment", "checks": checks})
    assert "unresolved[/]: most at risk entertainment -0.2 (-4.7, +4.4) points" in line


def test_a_variant_against_its_parent_names_what_changed_once():
    """It read 'parent r003-lora (method (method.head_init))'."""
    boot = {"delta": -0.031, "low": -0.06, "high": -0.004, "basis": "examples"}
    boot["example"] = {k: boot[k] for k in ("delta", "low", "high")}
    flips = {"fixed": {"count": 12, "ids": []}, "broken": {"count": 25, "ids": []}, "net": -13}
    parent = {
        "run": "r003-lora",
        "bootstrap": boot,
        "verdict": "worse on one seed",
        "flips": flips,
        "diff": {"method": [{"key": "method.head_init", "parent": "probe", "child": "new"}]},
    }
    run = {
        "id": "r004",
        "against": "r002-probe",
        "vs_reference": {"bootstrap": boot, "flips": flips},
        "guardrails": [],
        "verdict": "worse on one seed",
        "vs_parent": parent,
    }
    out = io.StringIO()
    _variant_notes(run, "macro_f1", Console(file=out, width=300))
    assert "  parent r003-lora (changed: method.head_init): Δ macro_f1 -3.1" in out.getvalue()


def test_the_table_s_title_gives_the_minimum_effect_in_points():
    """It read '(minimum effect 0.1)' above a column of points."""
    assert _effect({"primary_metric": "exact_match", "min_effect": 0.1}) == (
        "minimum effect +10.0 points"
    )
    assert _effect({"primary_metric": "bits_per_byte", "min_effect": 0.01}) == (
        "minimum effect 0.01 (a reduction)"
    )
    assert _effect({"primary_metric": "accuracy", "min_effect": None}) == "no hypothesis recorded"
