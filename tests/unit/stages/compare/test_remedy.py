"""What an unresolved guardrail's blocking reason asks for follows what keeps each interval
across its limit: the seeds' spread, the examples', or a run never scored; a guardrail broken
on the examples alone says a new seed could move it."""

from __future__ import annotations

from tunelab.stages.compare.rules import _broken_on_one_seed, _remedy


def rail(*checks: dict, on: str | None = None, status: str = "unresolved") -> dict:
    g = {"status": status, "checks": {f"c{i}": c for i, c in enumerate(checks)}}
    return g | ({"on": on} if on else {})


SEEDS = {"status": "unresolved", "basis": "seeds and examples", "needs": "more seeds"}
EXAMPLES = {"status": "unresolved", "needed_n": 900, "examples": 445}
HOLDS = {"status": "holds"}


def test_an_interval_widened_by_the_seeds_asks_for_seeds_of_the_run_judged():
    rails = [rail(SEEDS, on="general/bbc_news.jsonl")]
    assert _remedy(rails, ("r002-lora", 1)) == "more seeds (`tunelab noise r002-lora --seeds 3`)"
    assert _remedy(rails, ("r002-lora", 3)) == "more seeds (`tunelab noise r002-lora --seeds 5`)"
    assert _remedy(rails) == "more seeds (`tunelab noise RUN --seeds 3`)"


def test_an_interval_widened_by_the_examples_asks_for_examples_or_documents():
    assert _remedy([rail(EXAMPLES, HOLDS)]) == "more validation examples"
    assert _remedy([rail(EXAMPLES, on="news.jsonl")]) == "more documents in news.jsonl"


def test_each_need_is_named_once_and_guardrails_that_hold_ask_for_nothing():
    rails = [rail(SEEDS, SEEDS), rail(EXAMPLES), rail(EXAMPLES, status="holds")]
    said = _remedy(rails, ("r004", 1))
    assert said == "more seeds (`tunelab noise r004 --seeds 3`) and more validation examples"


def test_a_run_never_scored_on_the_text_asks_for_the_score():
    unscored = {"status": "unresolved", "not_checked": "r003 was never scored on it"}
    assert _remedy([rail(unscored, on="news.jsonl")]) == "every run scored on news.jsonl"
    # a source with no validation documents (every_source): its checks are keyed by source
    assert _remedy([{"status": "unresolved", "checks": {"code": unscored}}]) == "code measured"


def test_a_guardrail_broken_on_the_examples_alone_is_cautioned():
    broken = {"status": "broken"}
    (said,) = _broken_on_one_seed([rail(broken, status="broken")], ("r002-lora", 1))
    assert said.startswith("the guardrail was judged on one seed per arm and no noise record")
    assert "(`tunelab noise r002-lora --seeds 3` trains more seeds of it" in said
    seeded = broken | {"basis": "seeds and examples"}
    assert _broken_on_one_seed([rail(seeded, status="broken")]) == []
    # only the checks that broke it count: a seed-aware break beside an unresolved check
    assert _broken_on_one_seed([rail(seeded, EXAMPLES, status="broken")]) == []


def test_a_guardrail_past_three_classes_names_the_others_and_what_seeds_need():
    """It read '... would resolve it and 1 more' (1 more what?) and 'more seeds would resolve
    it (the seeds' noise does not shrink with n)'."""
    from tunelab.stages.compare.guardrails import describe

    def check(delta: float, needs: str | None = None) -> dict:
        c = {"delta": delta, "low": delta - 0.1, "high": delta + 0.1, "status": "unresolved"}
        return c | ({"needs": needs} if needs else {})

    checks = {name: check(0.01) for name in ("a", "b", "c", "objects")}
    checks["a"] = check(0.01, "more seeds")
    rail = {"metric": "f1", "scope": "every_class", "max_drop": 0.05, "status": "unresolved"}
    said = describe(rail | {"checks": checks})
    assert "more seeds would resolve it (more validation examples would not)" in said
    assert "; also unresolved: objects; limit -5.0 points" in said and "1 more" not in said
