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
    # the run's own note (its lost start) is said once, not again against its parent
    said = "r004: the head started from a linear probe ..."
    parent["warnings"] = [said, "against the parent only"]
    out = io.StringIO()
    _variant_notes(run | {"warnings": [said]}, "macro_f1", Console(file=out, width=300))
    assert (
        out.getvalue().count(said) == 1 and "(vs parent) against the parent only" in out.getvalue()
    )
    # a base moved, its bytes the same: recorded, not said as a change ("changed: ...,
    # model.path" where the run had counted none)
    moved = {"key": "model.path", "parent": "/old", "child": "/new", "same_base": True}
    parent["diff"] = parent["diff"] | {"runtime": [moved]}
    out = io.StringIO()
    _variant_notes(run, "macro_f1", Console(file=out, width=300))
    assert "  parent r003-lora (changed: method.head_init): Δ" in out.getvalue()


def test_the_table_s_title_gives_the_minimum_effect_in_points():
    """It read '(minimum effect 0.1)' above a column of points."""
    assert _effect({"primary_metric": "exact_match", "min_effect": 0.1}) == (
        "minimum effect +10.0 points"
    )
    assert _effect({"primary_metric": "bits_per_byte", "min_effect": 0.01}) == (
        "minimum effect 0.01 (a reduction)"
    )
    assert _effect({"primary_metric": "accuracy", "min_effect": None}) == "no hypothesis recorded"


def test_a_reason_shown_above_or_among_the_warnings_is_not_printed_again():
    """The primary's interval was printed twice, one line apart, and a concentrated gain once
    as a reason and again as a warning."""
    boot = {"delta": -0.01, "low": -0.1, "high": 0.08, "basis": "examples"}
    boot["example"] = {k: boot[k] for k in ("delta", "low", "high")}
    flips = {"fixed": {"count": 1, "ids": []}, "broken": {"count": 2, "ids": []}, "net": -1}
    handful = "the gain comes from a handful of examples: ..."
    run = {
        "id": "r005",
        "vs_reference": {"bootstrap": boot, "flips": flips, "metric": "bits_per_byte"},
        "guardrails": [],
        "verdict": "within seed noise",
        "reasons": [
            "bits_per_byte reduction -0.0100 (95% CI -0.1000 to +0.0800, seeds and examples)",
            "the examples alone exclude zero, the seeds' noise does not",
            handful,
        ],
        "warnings": [handful],
    }
    out = io.StringIO()
    _variant_notes(run, "bits_per_byte", Console(file=out, width=300))
    text = out.getvalue()
    assert "95% CI -0.1000" not in text and "the examples alone exclude zero" in text
    assert text.count("handful") == 1
    assert "  vs reference: better 1 " in text  # one seed: nothing more to say
    # against a reference of 2 seeds: the flips are its first seed's, the difference from its
    # mean (a run identical to its first seed read "better 0, worse 0" beside a difference)
    out = io.StringIO()
    _variant_notes(
        run | {"against": "r001"}, "bits_per_byte", Console(file=out, width=300), (2, 4.1)
    )
    text = out.getvalue()
    assert "  vs r001's first seed: better 1 " in text
    assert "  over the examples alone (from r001's mean over 2 seeds) -0.0100" in text


def test_a_reference_over_several_seeds_says_what_its_variants_are_against():
    """The row read 2.7190 (its first seed), the intervals were against the seeds' mean 2.7163."""
    from tunelab.views.compare import compare

    seeds = [{"run": f"r{i}", "seed": i, "bits_per_byte": v} for i, v in enumerate((2.7, 2.8))]
    result = {
        "id": "c001",
        "primary_metric": "bits_per_byte",
        "metrics": ["bits_per_byte"],
        "min_effect": 0.01,
        "reference": "r0",
        "groups": {},
        "runs": [
            {"id": "r0", "kind": "variant", "bits_per_byte": 2.7, "seeds": seeds},
            {"id": "r1", "kind": "variant", "bits_per_byte": 2.8, "seeds": seeds, "arm": "r0"}
            | {
                "vs_first": {
                    "bootstrap": {"delta": -0.1, "low": -0.2, "high": 0.0},
                    "verdict": "within seed noise",
                }
            },
        ],
    }
    out = io.StringIO()
    compare(result, Console(file=out, width=300))
    assert "r0 over its 2 seeds: bits per byte 2.7500 on average, the value each variant" in (
        out.getvalue()
    )
    result["runs"] = [result["runs"][0] | {"seeds": None}]
    out = io.StringIO()
    compare(result, Console(file=out, width=300))
    assert "on average" not in out.getvalue()


def test_a_class_without_an_example_reads_no_example_not_an_f1_of_0():
    from tunelab.views.compare import _per_group

    scores = {"sport": {"f1": 0.9, "support": 12}, "tech": {"f1": 0.0, "support": 0}}
    result = {"groups": "per_class", "runs": [{"id": "r001", "per_class": scores}]}
    out = io.StringIO()
    _per_group(result, Console(file=out, width=100))
    lines = {line.split()[0]: line.split()[1:] for line in out.getvalue().splitlines()[1:]}
    assert lines["sport"] == ["90.0"] and lines["tech"] == ["no", "example"]


def test_final_s_change_from_validation_is_of_the_values_it_shows():
    """66.6% -> 72.5% read "(+6.0 points)": the difference of the unrounded values."""
    import io

    from rich.console import Console

    from tunelab.views.final import final

    result = {
        "run": "r003-lora",
        "data_version": "v1",
        "test_sha256": "a" * 64,
        "metrics": {"macro_f1": 0.72549, "n": 96},
        "validation_metrics": {"macro_f1": 0.66551},
        "primary_metric": "macro_f1",
        "n": 1,
        "file": ".tunelab/finals/1-r003-lora.json",
        "repeated": False,
    }
    out = io.StringIO()
    final(result, Console(file=out, width=200))
    assert "validation 66.6% -> test 72.5% (+5.9 points)" in out.getvalue()
