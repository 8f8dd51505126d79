"""The verdict rules of `tunelab compare`: guardrails per class and overall, improved, no
evidence and worse against the minimum effect, flips, gains from a handful of examples."""

import pytest
from compare_labs import LABELS, add_run, make_lab, predictions

from tunelab.stages.compare.guardrails import describe
from tunelab.stages.compare.verdicts import compare


def test_class_guardrail_fails_when_one_class_drops_while_average_rises(tmp_path):
    lab = make_lab(
        tmp_path,
        [
            {"metric": "f1", "scope": "every_class", "max_drop": 0.05},
            {"metric": "accuracy", "scope": "overall", "max_drop": 0.05},
        ],
    )
    add_run(lab, "probe", "baseline", predictions({"a": 0.7, "b": 0.7, "c": 0.9}, n=100))
    add_run(lab, "lora", "variant", predictions({"a": 1.0, "b": 1.0, "c": 0.5}, n=100))
    result = compare(lab)
    variant = result["runs"][1]
    assert variant["accuracy"] > result["runs"][0]["accuracy"]
    class_rail, overall_rail = variant["guardrails"]
    assert overall_rail["status"] == "holds" and overall_rail["checks"]["overall"]["low"] > -0.05
    assert class_rail["status"] == "broken"
    assert [k for k, c in class_rail["checks"].items() if c["status"] == "broken"] == ["c"]
    assert class_rail["checks"]["c"]["high"] < -0.05  # the optimistic end is past the limit
    assert variant["verdict"] == "guardrail broken"
    # one seed per arm, no noise record: the reasons say a new seed could move it
    assert any(r.startswith("the guardrail was judged on one seed") for r in variant["reasons"])


def test_a_class_drop_the_size_of_noise_is_unresolved_not_broken(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "recall", "scope": "every_class", "max_drop": 0.05}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.8}))
    add_run(lab, "lora", "variant", predictions({"a": 0.95, "b": 0.95, "c": 0.7}))
    variant = compare(lab)["runs"][-1]
    (rail,) = variant["guardrails"]
    c = rail["checks"]["c"]
    assert c["delta"] < -0.05 < c["high"] and c["low"] < -0.05  # past the limit on the point
    assert rail["status"] == "unresolved" and c["needed_n"] > 90  # 30 c examples: noise
    # the gain is real, but an unresolved guardrail blocks `improved`...
    assert variant["vs_reference"]["bootstrap"]["low"] > 0
    assert variant["verdict"] == "guardrail unresolved"  # a gain, its cost not yet known
    assert any("blocks `improved`: more validation examples, or" in r for r in variant["reasons"])
    # ...unless the user accepts it, with a reason that is recorded
    accepted = compare(lab, accept_unresolved="class c is rare in production")
    assert accepted["runs"][-1]["verdict"] == "improved on one seed"
    assert accepted["rules"]["accepted_unresolved"] == "class c is rare in production"


def test_a_significantly_worse_variant_is_worse_not_broken(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "f1", "scope": "every_class", "max_drop": 0.01}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.9, "b": 0.9, "c": 0.9}, n=100))
    add_run(lab, "lora", "variant", predictions({"a": 0.7, "b": 0.7, "c": 0.7}, n=100))
    variant = compare(lab)["runs"][-1]
    assert variant["vs_reference"]["bootstrap"]["high"] < 0
    # one seed per arm: the table says so, as it does for a gain
    assert variant["verdict"] == "worse on one seed"
    assert variant["guardrails"][0]["status"] == "broken"
    # one seed per arm: a new seed could move a loss as far as a gain, and the reasons say so
    assert any(
        "how far a new seed alone would move it is not measured" in r for r in variant["reasons"]
    )


def test_without_a_recorded_hypothesis_there_are_metrics_but_no_verdict(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}], None)
    add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    add_run(lab, "lora", "variant", predictions({"a": 0.9, "b": 0.9, "c": 0.9}))
    result = compare(lab)
    variant = result["runs"][-1]
    assert variant["verdict"] is None and "without a hypothesis" in variant["reasons"][0]
    assert result["min_effect"] is None and variant["accuracy"] == pytest.approx(0.9)


def test_clear_gain_with_guardrails_held_is_improved(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}])
    add_run(lab, "majority", "baseline", predictions({"a": 0.5, "b": 0.5, "c": 0.5}))
    add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    add_run(lab, "lora", "variant", predictions({"a": 0.95, "b": 0.95, "c": 0.95}))
    result = compare(lab)
    assert result["reference"] == "r002-probe"  # the strongest baseline
    variant = result["runs"][-1]
    assert variant["verdict"] == "improved on one seed"
    assert variant["vs_reference"]["bootstrap"]["low"] > 0
    assert variant["vs_reference"]["mcnemar"]["broken"] == 0


def test_tiny_gain_is_no_evidence(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.8, "b": 0.8, "c": 0.8}))
    add_run(lab, "lora", "variant", predictions({"a": 0.8, "b": 0.8, "c": 0.8334}))
    variant = compare(lab)["runs"][-1]
    assert variant["verdict"] == "no evidence"
    assert any("below the minimum effect" in r for r in variant["reasons"])


def test_a_small_loss_is_not_called_a_gain_below_the_minimum(tmp_path):
    """A variant 6.7 points below its reference read "the gain is below the minimum effect"."""
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.5}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.9, "b": 0.9, "c": 0.9}))
    add_run(lab, "lora", "variant", predictions({"a": 0.9, "b": 0.9, "c": 0.8}))
    variant = compare(lab)["runs"][-1]
    assert variant["verdict"] == "no evidence" and variant["vs_reference"]["bootstrap"]["delta"] < 0
    assert "the estimate is a loss, not a gain" in variant["reasons"]
    assert not any("gain is below" in r for r in variant["reasons"])


def test_the_same_score_on_every_example_is_not_called_a_loss(tmp_path):
    """A LoRA that changed no answer's score read "the estimate is a loss, not a gain"."""
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.5}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.9, "b": 0.9, "c": 0.9}))
    add_run(lab, "lora", "variant", predictions({"a": 0.9, "b": 0.9, "c": 0.9}))
    variant = compare(lab)["runs"][-1]
    assert variant["verdict"] == "no evidence"
    said = "every example's accuracy was the same in both runs: no difference in it at all"
    assert said in variant["reasons"]  # of the primary metric: the others may have moved
    assert not any("loss" in r or "includes zero" in r for r in variant["reasons"])


def labelled(right: list[bool]) -> list[dict]:
    """Hand-made predictions: example i has gold LABELS[i % 3] and is right when right[i]."""
    rows = []
    for i, ok in enumerate(right):
        gold = LABELS[i % 3]
        wrong = LABELS[(i + 1) % 3]
        rows.append({"id": f"e{i:02d}", "gold": gold, "predicted": gold if ok else wrong})
    return rows


def test_flips_are_counted_and_named_on_a_hand_made_case(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 1.0}])
    ref = [True, True, True, False, False, False, True, False, True]
    new = [False, True, True, True, True, False, True, True, False]
    add_run(lab, "probe", "baseline", labelled(ref))
    add_run(lab, "lora", "variant", labelled(new))
    vs = compare(lab)["runs"][-1]["vs_reference"]
    assert vs["flips"]["fixed"] == {"count": 3, "ids": ["e03", "e04", "e07"]}
    assert vs["flips"]["broken"] == {"count": 2, "ids": ["e00", "e08"]}
    assert vs["flips"]["net"] == 1
    assert (vs["mcnemar"]["fixed"], vs["mcnemar"]["broken"]) == (3, 2)


def test_flip_ids_are_capped_at_five(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 1.0}])
    add_run(lab, "probe", "baseline", labelled([False] * 12))
    add_run(lab, "lora", "variant", labelled([True] * 12))
    fixed = compare(lab)["runs"][-1]["vs_reference"]["flips"]["fixed"]
    assert fixed["count"] == 12 and fixed["ids"] == ["e00", "e01", "e02", "e03", "e04"]


def test_a_gain_from_three_examples_is_flagged_as_concentrated(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.8, "b": 0.8, "c": 0.8}))
    add_run(lab, "lora", "variant", predictions({"a": 0.9, "b": 0.8, "c": 0.8}))
    variant = compare(lab)["runs"][-1]
    c = variant["vs_reference"]["concentration"]
    assert c["k"] == 3 and c["n"] == 90 and c["concentrated"]
    assert variant["vs_reference"]["flips"]["net"] == 3
    assert any("handful of examples" in w for w in variant["warnings"])
    assert any("handful of examples" in r for r in variant["reasons"])
    # in the metric's units: it read "-0.0108 per example" beside a table in points
    assert (
        "without the 3 most improved of 90, the mean change in accuracy over the other 87 is "
        "+0.0 points (fixed 3" in (variant["warnings"][0])
    )


def test_a_concentrated_reduction_is_written_as_a_reduction():
    from tunelab.stages.compare.rules import concentration_note

    c = {"k": 3, "n": 40, "delta_without_top_k": -0.0012}
    f = {"fixed": {"count": 5}, "broken": {"count": 35}, "net": -30}
    said = concentration_note(c, f, "bits_per_byte")
    assert (
        "without the 3 most improved of 40, the mean change in bits_per_byte over the other 37 "
        "is -0.0012 (a reduction is the gain)" in said
    )
    # a classifier's examples are right or wrong: beside macro-F1 the change is in accuracy
    said = concentration_note(
        c | {"delta_without_top_k": -0.011, "measure": "accuracy"}, f, "macro_f1"
    )
    assert "the mean change in accuracy over the other 37 is -1.1 points" in said
    # "net <= k" holds of 0/1 values alone: a mean of bits per byte over documents can be
    # concentrated with more documents better than worse (it read "net 8 <= 3")
    spread = {"fixed": {"count": 37}, "broken": {"count": 29}, "net": 8}
    said = concentration_note(c | {"n": 90}, spread, "bits_per_byte")
    assert said.endswith("(better 37, worse 29)") and "<=" not in said  # documents, not 0/1
    assert concentration_note(c, f, "bits_per_byte").endswith("(better 5, worse 35, net -30 <= 3)")
    accuracy = concentration_note(c | {"measure": "accuracy"}, f, "macro_f1")
    assert accuracy.endswith("(fixed 5, broken 35, net -30 <= 3)")


def test_a_spread_gain_is_not_concentrated_and_stays_improved(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    add_run(lab, "lora", "variant", predictions({"a": 0.95, "b": 0.95, "c": 0.95}))
    variant = compare(lab)["runs"][-1]
    assert not variant["vs_reference"]["concentration"]["concentrated"]
    assert variant["verdict"] == "improved on one seed"
    assert not any("handful" in w for w in variant["warnings"] + variant["reasons"])


def test_a_guardrail_on_its_limit_says_how_far_past_the_examples_it_would_need():
    from tunelab.stages.compare.guardrails import describe
    from tunelab.views.compare import guardrail_line

    near = {"delta": -0.046, "low": -0.142, "high": 0.039, "status": "unresolved"}
    rail = {"metric": "f1", "scope": "every_class", "max_drop": 0.05, "status": "unresolved"}
    rail |= {"worst": "politics", "checks": {"politics": near}}
    near |= {"needed_n": 557278, "examples": 91}  # the interval's centre sits on the limit
    assert "~557,278 examples (6,124x these 91) would resolve it" in describe(rail)
    said = guardrail_line(rail)
    assert "~557,278 validation examples (6,124x these 91) would resolve it" in said
    near |= {"needed_n": 173}  # within reach: the count alone
    assert "; ~173 validation examples would resolve it" in guardrail_line(rail)
    assert ", ~173 examples would resolve it;" in describe(rail)


def test_a_variant_that_gives_every_example_one_answer_is_said_to_separate_none():
    from tunelab.stages.compare.collapse import collapse_warnings

    one = {f"x{i}": {"id": f"x{i}", "gold": LABELS[i % 3], "predicted": "a"} for i in range(9)}
    some = {k: {**p, "predicted": p["gold"]} for k, p in one.items()}
    every = {  # multilabel: every label for every example, as a head at its start gives
        f"x{i}": {"id": f"x{i}", "gold": LABELS[: 1 + i % 3], "predicted": list(LABELS)}
        for i in range(9)
    }
    preds = {"r1-one": one, "r2-some": some, "r3-every": every}
    arm = [{"id": "r1-one"}, {"id": "r2-some"}, {"id": "r3-every"}]
    said = collapse_warnings(arm, preds.__getitem__, LABELS)
    assert len(said) == 2 and said[0].startswith("r1-one gives all 9 validation examples one")
    assert "answer ('a') where they have 3 different ones: it separates none of them" in said[0]
    assert said[1].startswith("r3-every gives all 9 validation examples one answer (all 3 labels)")
    same_gold = {k: {**p, "gold": "a"} for k, p in one.items()}  # nothing to separate
    assert collapse_warnings([{"id": "r"}], lambda _: same_gold, LABELS) == []
    assert said[0].endswith("more steps, a larger learning rate, or method.head_init: probe")
    # a head that started from a probe was moved there: it is not told to start from one
    probed = {"id": "r1-one", "trainable": {"head_init": {"from": "probe (one-vs-rest)"}}}
    (again,) = collapse_warnings([probed], preds.__getitem__, LABELS)
    assert again.endswith(
        "look at the run's training loss (a smaller training.lr, or method.head_init: new)"
    )


def test_compare_warns_of_a_variant_that_predicts_one_class(tmp_path):
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.05}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.7, "b": 0.7, "c": 0.7}))
    flat = [{**p, "predicted": "a"} for p in predictions({"a": 1.0, "b": 1.0, "c": 1.0})]
    add_run(lab, "lora", "variant", flat)
    (variant,) = [r for r in compare(lab)["runs"] if r["kind"] == "variant"]
    assert any(
        "r002-lora gives all 90 validation examples one answer" in w for w in variant["warnings"]
    )


def test_a_guardrail_that_allows_no_drop_says_so_not_minus_zero():
    """The template's `accuracy overall, max_drop: 0.0` read "limit -0.0"."""
    from tunelab.stages.compare.guardrails import describe
    from tunelab.views.compare import guardrail_line

    check = {"delta": -0.067, "low": -0.156, "high": 0.0, "status": "unresolved"}
    rail = {"metric": "accuracy", "scope": "overall", "max_drop": 0.0, "status": "unresolved"}
    rail |= {"worst": "overall", "checks": {"overall": check}}
    assert guardrail_line(rail).endswith("-6.7 (-15.6, +0.0) points, limit 0 (no drop)")
    assert describe(rail).endswith("; limit 0 (no drop)") and "limit -0" not in describe(rail)


def test_a_no_drop_guardrail_holds_where_no_example_dropped(tmp_path):
    """Two LoRAs with 100% JSON validity each read "unresolved: +0.0 (+0.0, +0.0), limit 0 (no
    drop); more seeds would resolve it", and that blocked `improved`."""
    from tunelab.stages.compare.guardrails import status_of

    assert status_of({"low": 0.0, "high": 0.0}, 0.0) == "holds"  # the same on every example
    assert status_of({"low": -0.02, "high": 0.1}, 0.02) == "holds"  # at the limit: allowed
    assert status_of({"low": -0.01, "high": 0.0}, 0.0) == "unresolved"  # some resample drops
    assert status_of({"low": -0.2, "high": -0.05}, 0.02) == "broken"
    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.0}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.9, "b": 0.9, "c": 0.9}))
    add_run(lab, "lora", "variant", predictions({"a": 0.9, "b": 0.9, "c": 0.9}))
    (rail,) = compare(lab)["runs"][-1]["guardrails"]
    assert rail["status"] == "holds", rail


def test_a_document_scored_better_is_not_said_to_be_fixed():
    """A pretrain lab's bits per byte read "fixed 45, broken 0": a document is scored better
    or worse, not fixed; an answer still is."""
    from tunelab.views.compare import _flips_line

    flips = {"fixed": {"count": 2, "ids": ["a", "b"]}, "broken": {"count": 0, "ids": []}}
    assert _flips_line({"metric": "bits_per_byte", "flips": flips}) == "better 2 (a, b), worse 0"
    assert _flips_line({"metric": "accuracy", "flips": flips}) == "fixed 2 (a, b), broken 0"


def test_every_verdict_word_has_a_colour_in_the_console_and_a_tone_in_the_report():
    from tunelab.stages.compare.rules import VERDICTS
    from tunelab.stages.report.charts import TONES
    from tunelab.views.style import VERDICT_STYLE

    assert set(VERDICTS) <= set(VERDICT_STYLE) and set(VERDICTS) <= set(TONES)
    assert "worse on one seed" in VERDICTS  # a loss on one seed is said as one, as a gain is


def test_runs_not_completed_are_named_as_not_judged(tmp_path):
    """An interrupted or running run was left out of the comparison without a word."""
    import io

    from rich.console import Console

    from tunelab.views.compare import compare as show

    lab = make_lab(tmp_path, [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}])
    add_run(lab, "probe", "baseline", predictions({"a": 0.8, "b": 0.8, "c": 0.8}))
    add_run(lab, "lora", "variant", predictions({"a": 0.9, "b": 0.8, "c": 0.8}))
    add_run(
        lab, "stopped", "variant", predictions({"a": 0.9, "b": 0.8, "c": 0.8}), status="interrupted"
    )
    result = compare(lab)
    assert result["left_out"] == [{"run": "r003-stopped", "status": "interrupted"}]
    out = io.StringIO()
    show(result, Console(file=out, width=200))
    assert "not judged, not completed: r003-stopped (interrupted)" in out.getvalue()


def test_a_guardrail_holds_only_where_its_examples_could_show_a_drop_of_its_size(tmp_path):
    """4 examples of a class alike in both runs read "holds: +0.0 (+0.0, +0.0)" against a
    limit of 5 points: no resample can drop, however few the examples. None of 4 got worse
    bounds an unseen drop only to 60 points (exact binomial); 200 bound it to 1.8."""
    rail = {"metric": "f1", "scope": "every_class", "max_drop": 0.05}
    for n, status in ((4, "unresolved"), (200, "holds")):
        lab = make_lab(tmp_path / str(n), [rail])
        add_run(lab, "probe", "baseline", predictions({"a": 1.0, "b": 0.5, "c": 0.5}, n=n))
        add_run(lab, "lora", "variant", predictions({"a": 1.0, "b": 0.5, "c": 0.5}, n=n))
        (judged,) = compare(lab)["runs"][-1]["guardrails"]
        a = judged["checks"]["a"]
        assert (a["delta"], a["high"], a["status"]) == (0.0, 0.0, status), n
        assert a["unseen"]["examples"] == n and a["unseen"]["bootstrap_low"] == 0.0
        assert a["low"] == pytest.approx(-(1 - 0.025 ** (1 / n)), abs=1e-4)
    # the 4 examples of each class: ~72 of each would resolve it, so ~216 in all
    assert judged["status"] == "holds"
    lab = make_lab(tmp_path / "again", [rail])
    add_run(lab, "probe", "baseline", predictions({"a": 1.0, "b": 0.5, "c": 0.5}, n=4))
    add_run(lab, "lora", "variant", predictions({"a": 1.0, "b": 0.5, "c": 0.5}, n=4))
    (judged,) = compare(lab)["runs"][-1]["guardrails"]
    assert judged["status"] == "unresolved" and judged["checks"]["a"]["needed_n"] == 216
    assert (
        "a +0.0 points (-60.2 to +0.0) (none of its 4 examples got worse: too few to rule out an "
        "unseen drop of the limit's size), ~216 examples (18x these 12) would resolve it"
    ) in describe(judged)
    # a limit of 0 is a rule about these examples: none got worse, so it holds
    lab = make_lab(tmp_path / "zero", [rail | {"max_drop": 0.0}])
    add_run(lab, "probe", "baseline", predictions({"a": 1.0, "b": 0.5, "c": 0.5}, n=4))
    add_run(lab, "lora", "variant", predictions({"a": 1.0, "b": 0.5, "c": 0.5}, n=4))
    (judged,) = compare(lab)["runs"][-1]["guardrails"]
    assert judged["status"] == "holds" and "unseen" not in judged["checks"]["a"]


def test_a_run_whose_process_died_is_left_out_as_lost_not_running(tmp_path):
    """A run killed with -9 read "not judged, not completed: r004-k (running)"."""
    import socket

    lab = make_lab(tmp_path, [])
    add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    process = {"pid": 2**22 + 12345, "host": socket.gethostname()}  # no such process
    preds = predictions({"a": 0.6, "b": 0.6, "c": 0.6})
    add_run(lab, "k", "variant", preds, status="running", process=process)
    (left,) = compare(lab)["left_out"]
    assert left == {"run": "r002-k", "status": "lost"}


def test_a_concentration_of_arms_of_several_seeds_says_it_is_their_first_seeds():
    """Beside a five-seed interval of +11.3 (+2.4, +20.3), "the gain comes from a handful of
    examples" and McNemar's p = 0.63 were the first seeds' alone, unlabelled."""
    from tunelab.stages.compare.rules import concentration_note, several_seeds

    c = {"k": 3, "n": 60, "delta_without_top_k": 0.0, "measure": "accuracy"}
    f = {"fixed": {"count": 10}, "broken": {"count": 7}, "net": 3}
    five = {"bootstrap": {"values_a": [0.5] * 5, "values_b": [0.6] * 5}}
    one = {"bootstrap": {"values_a": [0.5], "values_b": [0.6]}}
    assert several_seeds(five) and not several_seeds(one)
    said = concentration_note(c, f, "accuracy", several_seeds(five))
    assert said.startswith("the gain comes from a handful of examples, between the arms' first")
    assert "first seeds" not in concentration_note(c, f, "accuracy", several_seeds(one))
