"""Arms of seeds in compare: seeds pooled into a seed-aware interval, the verdict words that
say which noise was counted, and a noise record that widens a single seed's interval."""

from __future__ import annotations

import copy
import io

from compare_labs import add_run, make_lab, predictions
from rich.console import Console

from tunelab.core.replicates import family
from tunelab.stages.compare.verdicts import compare
from tunelab.views.compare import compare as show

RAILS = [{"metric": "accuracy", "scope": "overall", "max_drop": 0.5}]


def seeded(lab, seed: int, **training) -> dict:
    spec = copy.deepcopy(lab.spec.to_dict())
    spec["training"].update(seed=seed, **training)
    return spec


def lr_seeds(lab, *seeds: tuple[int, float]) -> list[str]:
    """Runs of another learning rate (the same family as the lab's spec), one per (seed, rate
    of right answers)."""
    return [
        add_run(
            lab,
            "lr",
            "variant",
            predictions(dict.fromkeys("abc", rate)),
            spec=seeded(lab, s, lr=1e-3),
        )
        for s, rate in seeds
    ]


def seeds_far_apart(tmp_path):
    """A probe at 60%, and a LoRA arm of three seeds at 95%, 65% and 80%: the lab and the
    arm's first run."""
    lab = make_lab(tmp_path, RAILS)
    add_run(lab, "probe", "baseline", predictions({"a": 0.6, "b": 0.6, "c": 0.6}))
    first = add_run(lab, "lora", "variant", predictions({"a": 0.95, "b": 0.95, "c": 0.95}))
    for seed, rate in ((1, 0.65), (2, 0.8)):
        add_run(
            lab, "lora", "variant", predictions(dict.fromkeys("abc", rate)), spec=seeded(lab, seed)
        )
    return lab, first


def test_seeds_far_apart_make_a_gain_on_the_examples_within_seed_noise(tmp_path):
    lab, first = seeds_far_apart(tmp_path)
    result = compare(lab)
    row = next(r for r in result["runs"] if r["id"] == first)
    boot = row["vs_reference"]["bootstrap"]
    assert boot["basis"] == "seeds and examples" and boot["seeds"]["seed_df"] == 2
    assert boot["example"]["low"] > 0 and boot["low"] < 0  # the seeds' spread swallows it
    assert row["verdict"] == "within seed noise"
    assert [s["seed"] for s in row["seeds"]] == [0, 1, 2]
    others = [r for r in result["runs"] if r.get("arm") == first]
    assert [r["vs_first"]["verdict"] for r in others] == ["within seed noise"] * 2
    assert "only training.seed differs" in others[0]["vs_first"]["reasons"][0]


def test_close_seeds_let_a_clear_gain_read_improved(tmp_path):
    lab = make_lab(tmp_path, RAILS)
    add_run(lab, "probe", "baseline", predictions({"a": 0.5, "b": 0.5, "c": 0.5}, n=60))
    first = add_run(lab, "lora", "variant", predictions(dict.fromkeys("abc", 0.9), n=60))
    add_run(
        lab, "lora", "variant", predictions(dict.fromkeys("abc", 0.88), n=60), spec=seeded(lab, 7)
    )
    add_run(
        lab, "lora", "variant", predictions(dict.fromkeys("abc", 0.92), n=60), spec=seeded(lab, 8)
    )
    row = next(r for r in compare(lab)["runs"] if r["id"] == first)
    assert row["verdict"] == "improved"


def save_noise(lab, noise_id: str, runs: list[str], fam: dict) -> None:
    """A noise record as `tunelab noise` saves it: with its event (one written by hand is in
    no event of the log, which `compare` refuses)."""
    path = lab.store.root / "noise" / f"{noise_id}.json"
    path.parent.mkdir(exist_ok=True)
    shown = str(path.relative_to(lab.store.lab))
    record = {"id": noise_id, "created": "2026-01-01T00:00:00Z", "file": shown, "of": runs[0]}
    lab.store.save(path, record | {"group": "g001", "runs": runs, "family": fam}, "noise")


def test_a_noise_record_of_the_family_widens_a_single_seed(tmp_path):
    lab = make_lab(tmp_path, RAILS)
    add_run(lab, "probe", "baseline", predictions(dict.fromkeys("abc", 0.6)))
    single = add_run(lab, "lora", "variant", predictions(dict.fromkeys("abc", 0.8)))
    before = next(r for r in compare(lab)["runs"] if r["id"] == single)
    assert before["vs_reference"]["bootstrap"]["basis"] == "examples"
    assert before["verdict"] == "improved on one seed"
    # another learning rate over two seeds far apart: same family, so its spread applies
    noisy = lr_seeds(lab, (5, 0.95), (6, 0.55))
    record = lab.store.read_record(noisy[0])
    assert family(record) == family(lab.store.read_record(single))
    save_noise(lab, "n001", noisy, family(record))
    result = compare(lab)
    after = next(r for r in result["runs"] if r["id"] == single)
    boot = after["vs_reference"]["bootstrap"]
    assert boot["basis"] == "seeds and examples" and boot["seeds"]["sources"] == ["noise n001"]
    assert boot["high"] - boot["low"] > 2 * (boot["example"]["high"] - boot["example"]["low"])
    assert after["verdict"] == "within seed noise" and after["noise"] == ["noise n001"]
    assert result["rules"]["noise"] == ["n001"] and result["rules"]["noise_elsewhere"] == []
    # measured on other validation examples (an older data version): not counted, and said
    # (compare read "no noise record" with one in the lab)
    old = family(record) | {"data_version": "v0"}  # as `tunelab noise` made it there: its
    save_noise(lab, "n001", ["r090-lr", "r091-lr"], old)  # runs on v0
    result = compare(lab)
    assert result["rules"]["noise"] == []
    assert result["rules"]["noise_elsewhere"] == [{"id": "n001", "data_version": "v0"}]
    out = io.StringIO()
    show(result, Console(file=out, width=300))
    assert "not counted: noise record n001 (data version v0), measured on other validation" in (
        out.getvalue()
    )


def test_noise_records_that_share_runs_count_once_the_one_with_most_seeds(tmp_path):
    """`tunelab noise` twice on one run writes records of the same seeds: pooling both would
    count those seeds twice (twice the degrees of freedom, a narrower interval)."""
    lab = make_lab(tmp_path, RAILS)
    add_run(lab, "probe", "baseline", predictions(dict.fromkeys("abc", 0.6)))
    single = add_run(lab, "lora", "variant", predictions(dict.fromkeys("abc", 0.8)))
    noisy = lr_seeds(lab, (5, 0.95), (6, 0.55), (7, 0.7))
    fam = family(lab.store.read_record(noisy[0]))
    for n, runs in (("n001", noisy[:2]), ("n002", noisy[:2]), ("n003", noisy), ("n004", noisy[1:])):
        save_noise(lab, n, runs, fam)
    result = compare(lab)
    after = next(r for r in result["runs"] if r["id"] == single)
    assert after["vs_reference"]["bootstrap"]["seeds"]["sources"] == ["noise n003"]
    assert result["rules"]["noise"] == ["n003"]


def test_seeds_do_not_lift_the_unseen_drop_bound_of_a_group_with_few_examples(tmp_path):
    """Seeds measure training's noise and add no examples: 4 alike examples of each class
    read "unresolved" on one seed, and "holds" on +0.0 (+0.0, +0.0) once three tied seeds made
    the interval seed-aware (the bound was skipped for a seed-aware check). Tied seeds are now
    judged as one seed is, and the bound holds there too."""
    rail = {"metric": "f1", "scope": "every_class", "max_drop": 0.05}
    lab = make_lab(tmp_path, [rail])
    alike = {"a": 1.0, "b": 0.5, "c": 0.5}
    add_run(lab, "probe", "baseline", predictions(alike, n=4))
    first = add_run(lab, "lora", "variant", predictions(alike, n=4))
    for seed in (1, 2):
        add_run(lab, "lora", "variant", predictions(alike, n=4), spec=seeded(lab, seed))
    row = next(r for r in compare(lab)["runs"] if r["id"] == first)
    (judged,) = row["guardrails"]
    a = judged["checks"]["a"]
    assert a["seeds_tied"]["df"] == 2 and a["unseen"]["examples"] == 4
    assert a["low"] < -0.05 and a["status"] == judged["status"] == "unresolved"
    assert a["needed_n"] == 216 and "needs" not in a  # more examples, not more seeds
    assert row["verdict"] != "improved"


def test_the_view_gives_a_variant_arm_s_mean_beside_its_first_seed_s_row(tmp_path):
    """The row showed seed 0's 95.0 beside a difference from the arm's mean, never printed."""
    import io

    from rich.console import Console

    from tunelab.views.compare import compare as show

    lab, first = seeds_far_apart(tmp_path)
    out = io.StringIO()
    show(compare(lab), Console(file=out, width=300))
    said = " ".join(out.getvalue().split())
    assert (
        f"accuracy of each variant arm on average, the value its difference is from: {first} "
        "80.0 over 3 seeds (its row gives its first seed's own)"
    ) in said


def test_seeds_that_tie_have_not_measured_the_seeds_noise(tmp_path):
    """Two seeds that each fix the same 4 of 90 examples tie (a spread of 0 on 1 degree of
    freedom): judged as measured, that read "improved" where one seed read "no evidence"
    (McNemar p = 0.125); they are judged as one seed is, and said to tie."""
    lab = make_lab(tmp_path, RAILS)
    add_run(lab, "probe", "baseline", predictions(dict.fromkeys("abc", 0.6)))
    gain = {"a": 0.6 + 4 / 30, "b": 0.6, "c": 0.6}
    first = add_run(lab, "lora", "variant", predictions(gain))
    add_run(lab, "lora", "variant", predictions(gain), spec=seeded(lab, 1))
    row = next(r for r in compare(lab)["runs"] if r["id"] == first)
    boot = row["vs_reference"]["bootstrap"]
    assert boot["basis"] == "examples" and boot["seeds"] is None
    assert boot["seeds_tied"]["df"] == 1 and boot["low"] > 0  # the bootstrap alone excludes 0
    assert row["verdict"] == "no evidence"
    assert any("McNemar's exact test gives p = 0.125" in r for r in row["reasons"])
    assert any("seeds that tie" in r and "as on one seed" in r for r in row["reasons"])


def test_a_repeat_of_the_reference_is_said_as_one(tmp_path):
    """A run of the reference's own spec and seed was judged as a variant ("+2.5, no
    evidence") with `repeat_of` in the JSON alone: the terminal now says what it is."""
    lab = make_lab(tmp_path, RAILS)
    add_run(lab, "probe", "baseline", predictions(dict.fromkeys("abc", 0.6)))
    first = add_run(lab, "lora", "variant", predictions(dict.fromkeys("abc", 0.8)))
    again = add_run(lab, "lora", "variant", predictions(dict.fromkeys("abc", 0.82)))
    result = compare(lab)
    row = next(r for r in result["runs"] if r["id"] == again)
    assert row["repeat_of"] == first
    out = io.StringIO()
    show(result, Console(file=out, width=300))
    assert f"a repeat of {first} (the same spec and seed): not a seed of its arm" in (
        out.getvalue()
    )


def test_a_real_gain_below_the_minimum_effect_is_not_shown_as_nothing(tmp_path):
    """A gain of +11.3 (+2.4, +20.3) below a min_effect of 15 read "no evidence", the word of an
    interval across zero: the table now says it is a gain, below what was asked."""
    from compare_labs import HYPOTHESIS

    lab = make_lab(tmp_path, RAILS, HYPOTHESIS | {"min_effect": 0.5})
    add_run(lab, "probe", "baseline", predictions(dict.fromkeys("abc", 0.6)))
    lora = add_run(lab, "lora", "variant", predictions(dict.fromkeys("abc", 0.95)))
    result = compare(lab)
    row = next(r for r in result["runs"] if r["id"] == lora)
    assert row["verdict"] == "no evidence" and row["vs_reference"]["bootstrap"]["low"] > 0
    out = io.StringIO()
    show(result, Console(file=out, width=300))
    assert "no evidence (a gain, below min_effect)" in out.getvalue()
