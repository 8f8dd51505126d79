"""What the classification and extraction demos say about seed noise and their answer follows
the comparison they read: change the result, and the sentence changes."""

from __future__ import annotations

from tunelab.demo.classification import _conclusion
from tunelab.demo.report import seed_note


def row(run_id: str, verdict: str, basis: str = "examples") -> dict:
    seeds = {"sources": ["r003-lora (3 seeds)"]} if basis != "examples" else None
    return {
        "id": run_id,
        "kind": "variant",
        "verdict": verdict,
        "vs_reference": {"bootstrap": {"basis": basis, "seeds": seeds}},
    }


def test_one_seed_each_is_said_with_what_would_measure_it():
    said = seed_note({"runs": [row("r003-lora", "improved on one seed"), row("r004-h", "worse")]})
    assert "r003-lora, r004-h ran one seed each" in said
    assert "`tunelab noise r003-lora --seeds 3` measures the floor in 2 more runs" in said
    one = seed_note({"runs": [row("r002-lora", "guardrail broken")]})
    assert "r002-lora ran one seed and the lab has no noise record for it, so its interval " in one


def test_a_command_the_comparison_gave_is_not_given_again():
    broken = row("r002-lora", "guardrail broken")
    broken["reasons"] = ["... (`tunelab noise r002-lora --seeds 3` trains more seeds of it ...)"]
    said = seed_note({"runs": [broken]})
    assert "`tunelab noise" not in said and "that command above measures the floor" in said


def test_counted_seeds_name_where_their_spread_came_from():
    said = seed_note({"runs": [row("r003-lora", "improved", "seeds and examples")]})
    assert "counts the seeds' spread" in said and "r003-lora (3 seeds)" in said


def test_the_conclusion_reads_the_verdicts():
    probe = {"reference": "r002-probe", "runs": [{"id": "r002-probe", "macro_f1": 0.931}]}
    said = _conclusion(probe, [row("r003-lora", "no evidence")])
    assert "(r002-probe," in said and "scores 93.1% macro-F1" in said and "not beaten" in said
    assert said.endswith("the honest answer to the question is 'not shown at this budget'.")
    probe["runs"][0]["macro_f1"] = 0.5
    worse = _conclusion(probe, [row("r003-lora", "worse")])
    assert "scores 50.0% macro-F1" in worse and "(r003-lora did worse)" in worse
    one_worse = _conclusion(probe, [row("r003-lora", "worse on one seed")])
    assert "(r003-lora did worse on one seed)" in one_worse
    one = _conclusion(probe, [row("r003-lora", "improved on one seed")])
    assert one.startswith("r003-lora beat r002-probe on one seed each") and "not measured" in one
    beyond = _conclusion({"reference": "r001-majority"}, [row("r003-lora", "improved")])
    assert beyond == "r003-lora beat r001-majority beyond the seeds' noise."
    assert "No variant beats r001-majority" in _conclusion({"reference": "r001-majority"}, [])
    held = _conclusion(probe, [row("r003-lora", "guardrail unresolved")])
    assert held.startswith("r003-lora gained on r002-probe, but a guardrail is unresolved")
    assert "not beaten" not in held  # a gain blocked by its guardrail is not a loss


def test_the_image_demo_answer_reads_the_best_variant_and_its_verdict():
    from tunelab.demo.images import conclusion

    def runs(verdict: str) -> dict:
        return {
            "primary_metric": "macro_f1",
            "reference": "r002-probe",
            "runs": [
                {"id": "r002-probe", "kind": "baseline", "macro_f1": 0.8},
                {"id": "r003-lora", "kind": "variant", "macro_f1": 0.85, "verdict": verdict},
                {"id": "r004-full", "kind": "variant", "macro_f1": 0.7, "verdict": "worse"},
            ],
        }

    said = conclusion(runs("no evidence"))
    assert "r003-lora, scores 85.0% macro-F1 against 80.0% for r002-probe" in said
    assert said.endswith("No variant beat the reference.")  # no interval recorded
    boot = {"delta": 0.02, "low": -0.043, "high": 0.089}
    across = runs("no evidence")
    across["runs"][1] |= {"vs_reference": {"bootstrap": boot}, "n": 96}
    said = conclusion(across)
    assert "none is shown to add nothing either: the best's interval, -4.3 to +8.9 points" in said
    assert "96 validation images on one seed cannot tell them apart" in said
    assert "what the fine-tunes know" not in said  # it claimed the features were all there was
    held = conclusion(runs("guardrail unresolved"))
    assert "It gained, but a guardrail is unresolved" in held and "No variant" not in held
    won = conclusion(runs("improved on one seed"))
    assert "verdict improved on one seed" in won
    assert "beat the reference on one seed each (r003-lora): whether a new seed" in won
    beyond = conclusion(runs("improved"))
    assert "beat the reference beyond the seeds' noise (r003-lora)." in beyond


def ablated(low: float, high: float, basis: str = "examples") -> dict:
    """The classification demo's random-head run, against its LP-FT parent."""
    boot = {"delta": (low + high) / 2, "low": low, "high": high, "basis": basis}
    return {"id": "r004-head_init-new", "vs_parent": {"run": "r003-lora", "bootstrap": boot}}


def test_what_lp_ft_bought_is_said_on_the_basis_of_its_interval():
    from tunelab.demo.classification import _heads_sentence

    one = _heads_sentence(ablated(-0.06, -0.004))
    assert "-3.2 points of macro-F1 (95% CI -6.0 to -0.4)" in one
    assert "LP-FT did better than a random head on these validation examples, on one seed" in one
    assert "whether a new seed would too is not measured here" in one and "noise" not in one
    seeds = _heads_sentence(ablated(-0.06, -0.004, "seeds and examples"))
    assert seeds.endswith("LP-FT did better than a random head beyond the seeds' noise.")
    assert "a random head did better than LP-FT on these" in _heads_sentence(ablated(0.01, 0.03))
    assert "cannot be told apart" in _heads_sentence(ablated(-0.02, 0.01))


def test_a_broken_forgetting_guardrail_on_one_seed_says_so():
    from tunelab.demo.extraction import NEWS, forgetting_note

    def lab(basis: str | None) -> tuple[dict, dict, dict]:
        check = {"delta": -0.065, "low": -0.072, "high": -0.059, "status": "broken"}
        if basis:
            check["basis"] = basis
        guard = {"on": NEWS, "status": "broken", "max_drop": 0.05, "checks": {"overall": check}}
        result = {"runs": [{"id": "r002-lora", "guardrails": [guard]}]}

        def run(run_id: str, bpb: float) -> dict:
            return {"id": run_id, "guard": {NEWS: {"metrics": {"bits_per_byte": bpb, "n": 25}}}}

        return result, run("r001-zero-shot", 1.103), run("r002-lora", 1.168)

    one = forgetting_note(*lab(None))
    assert "bits per byte went from 1.103 to 1.168 (+0.065, 95% CI +0.059 to +0.072)" in one
    assert "some of the base's prose is lost on this seed (the interval counts the documents" in one
    assert "So the verdict is 'guardrail broken', not 'improved'" in one  # not "the task is won"
    seeds = forgetting_note(*lab("seeds and examples"))
    assert "some of the base's prose is lost. The bundle's model card records both." in seeds
    assert "this seed" not in seeds


def test_a_forgetting_guardrail_that_holds_on_one_seed_says_another_may_lose_more():
    """A broken one said "another seed may lose less"; a holding one said nothing of a seed
    that may lose more."""
    from tunelab.demo.extraction import NEWS, forgetting_note

    def note(basis: str | None) -> str:
        check = {"delta": -0.037, "low": -0.041, "high": -0.033, "status": "holds"}
        check |= {"basis": basis} if basis else {}
        guard = {"on": NEWS, "status": "holds", "max_drop": 0.05, "checks": {"overall": check}}
        result = {"runs": [{"id": "r002-lora", "guardrails": [guard]}]}
        runs = [
            {"id": i, "guard": {NEWS: {"metrics": {"bits_per_byte": b, "n": 25}}}}
            for i, b in (("r001-zero-shot", 1.103), ("r002-lora", 1.140))
        ]
        return forgetting_note(result, *runs)

    assert note(None).endswith("another seed may lose more (`tunelab noise` measures it).")
    assert "another seed" not in note("seeds and examples")
