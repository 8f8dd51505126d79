"""The export view names what regressed, where the model card gives the intervals."""

from __future__ import annotations

import io

from rich.console import Console

from tunelab.views.export import regressions


def _r(metric: str, scope: str = "overall", on: str | None = None, status: str = "holds"):
    return {"metric": metric, "scope": scope, "on": on, "status": status, "delta": -0.01}


def test_each_regression_is_named_with_its_status_worst_first():
    line = regressions([_r("f1", "sport"), _r("bits_per_byte", on="general/news.jsonl")])
    assert line == (  # "worse than the reference ... (holds)" read as a contradiction
        "worse than the reference in the point estimate (each guardrail's status in brackets): "
        "f1 of sport (holds), bits_per_byte on general/news.jsonl (holds); their intervals in "
        "the model card"
    )


def test_past_three_the_rest_are_counted_and_none_says_so():
    many = [_r("f1", c, status="broken") for c in ("a", "b", "c", "d", "e")]
    assert regressions(many).endswith(
        "f1 of c (broken) and 2 more; their intervals in the model card"
    )
    assert regressions([_r("json_valid")]) == (
        "worse than the reference in the point estimate (each guardrail's status in brackets): "
        "json_valid overall (holds); their intervals in the model card"
    )
    assert regressions([]) == "no guardrail measured a regression"


def test_the_cut_says_how_many_inputs_to_how_many_tokens_or_none():
    from tunelab.views.export import _cut

    cut = {"split": "validation", "max_length": 128, "truncated": 445, "n": 445}
    assert _cut(cut) == "; 445 of 445 validation inputs cut to 128 tokens (model.max_length)"
    assert _cut(cut | {"truncated": 0, "n": 60, "max_length": 320}) == (
        "; no validation input cut (model.max_length 320)"
    )


def test_a_verdict_says_what_it_does_not_cover():
    from tunelab.views.export import verify

    result = {
        "bundle": "bundles/r002",
        "base": "base.gguf",
        "seconds": 12.0,
        "passed": True,
        "items": [
            {"name": "files", "passed": True, "detail": "12 files as listed"},
            {"name": "gguf", "passed": False, "detail": "...", "not_checked": "not built"},
        ],
        "not_checked": ["gguf (llama.cpp runtime not built (make gguf-runtime))"],
    }
    out = io.StringIO()
    verify(result, Console(file=out, width=200))
    text = out.getvalue()
    assert "VERIFIED: bundles/r002" in text and "? gguf" in " ".join(text.split())
    assert "not checked, so not part of that verdict: gguf (llama.cpp runtime not built" in text


def test_an_export_no_comparison_judged_says_no_guardrail_was_measured():
    """It read "no guardrail measured a regression" where no guardrail was measured at all."""
    from tunelab.views.export import export

    lim = {"verdict": None, "source": "no comparison judged it", "regressed": [], "truncation": {}}
    result = {
        "run": "r002-mha",
        "bundle": "bundles/r002-mha",
        "files": ["README.md"],
        "base_model": {"name": "scratch LlamaConfig", "weights_sha256": "ab" * 32},
        "limitations": lim,
    }
    out = io.StringIO()
    export(result, Console(file=out, width=200))
    assert "verdict none (no comparison judged it); no guardrail was measured" in out.getvalue()
    out = io.StringIO()
    export(result | {"limitations": lim | {"verdict": "improved"}}, Console(file=out, width=200))
    assert "no guardrail measured a regression" in out.getvalue()
