"""The verdict words and the rule that picks one, recorded with every comparison.

An interval is judged on the seeds and the examples when the seeds' variance is known (an arm
with two or more seeds, or a noise record of the family: `two_level.py`), else on the examples
alone, and the verdict says which:

- **worse**: the judged interval is below zero, counting the seeds; **worse on one seed**: the
  same on the examples alone (a new seed could have produced it, as a gain);
- **guardrail broken**: a guardrail's judged interval is past its limit (`guardrails.py`);
- **improved**: the estimate meets the minimum effect, the seed-aware interval is above zero, and no
  guardrail is unresolved (or the user accepted the unresolved ones with a recorded reason);
- **improved on one seed**: the same, judged on the examples alone: a new seed could have
  produced it; `final` opens the test split for it only with a reason;
- **guardrail unresolved**: improved or improved on one seed, but a guardrail is unresolved
  and nobody accepted it: the gain is shown, its cost is not yet known either way;
- **within seed noise**: the example-level interval excludes zero but the seed-aware one does
  not; and always for two runs that differ only in `training.seed` (they measure the noise);
- **no evidence**: anything else.
"""

from __future__ import annotations

from tunelab.core.replicates import several_seeds
from tunelab.core.spec import Hypothesis
from tunelab.stages.compare.guardrails import BROKEN, HOLDS, ROUNDING, UNRESOLVED, describe
from tunelab.stages.compare.two_level import SEEDS
from tunelab.tasks import units
from tunelab.tasks.pretrain import lower_is_better

IMPROVED, ONE_SEED, SEED_NOISE = "improved", "improved on one seed", "within seed noise"
WORSE, WORSE_ONE_SEED = "worse", "worse on one seed"
LOSSES = (WORSE_ONE_SEED, WORSE)
"""The verdicts of a judged interval below zero, on one seed or over the seeds."""
BROKEN_VERDICT, NO_EVIDENCE, UNRESOLVED_VERDICT = (
    "guardrail broken",
    "no evidence",
    "guardrail unresolved",
)
VERDICTS = (
    IMPROVED,
    ONE_SEED,
    UNRESOLVED_VERDICT,
    SEED_NOISE,
    NO_EVIDENCE,
    WORSE_ONE_SEED,
    WORSE,
    BROKEN_VERDICT,
)

VERDICT_RULE = (
    "worse: judged interval below zero (worse on one seed: the example-level interval alone, no "
    "replicates, no noise record); guardrail broken: a guardrail's judged interval past its "
    "limit; improved: estimate meets the minimum effect, seed-aware interval above zero, no "
    "guardrail unresolved (or accepted with a reason); improved on one seed: the same on the "
    "example-level interval alone (no replicates, no noise record, or seeds that tie); "
    "guardrail unresolved: either of those "
    "with a guardrail unresolved and not accepted; within seed noise: the example-level "
    "interval excludes zero but the seed-aware one does not, or the two runs differ only in "
    "training.seed; otherwise no evidence. On one seed, a primary that is the share of examples "
    "right (accuracy, exact match, ...) also needs McNemar's exact test below 0.05, and one that "
    "is a mean of partial credits over fewer than 100 examples the paired sign-flip test, and "
    "any other metric over fewer than 100 examples (macro-F1, bits per byte) the paired swap "
    "test, each below 0.05: on a few changed examples the bootstrap's percentile interval is "
    "too narrow"
)
MCNEMAR_LEVEL = 0.05
"""The exact test's level that a one-seed verdict on a 0/1 primary must also pass."""


def noise_command(judged: tuple[str, int] | None) -> str:
    """The command that adds seeds to `judged` (the run judged, and the seeds it has): three in
    all, or two more than it has."""
    run, seeds = judged or ("RUN", 0)
    return f"`tunelab noise {run} --seeds {3 if seeds < 3 else seeds + 2}`"


def one_seed_caution(judged: tuple[str, int] | None = None, what: str = "") -> str:
    """What a verdict (or, with `what`, a guardrail) judged on one seed per arm cannot say."""
    return (
        f"{what}one seed per arm and no noise record: how far a new seed alone would move it is "
        "not measured "
        f"({noise_command(judged)} trains more seeds of it and measures the floor)"
    )


def tied_caution(tied: dict, what: str = "") -> str:
    """What a verdict judged on seeds that all scored alike cannot say (`Pair.interval`'s
    `seeds_tied`)."""
    return (
        f"{what}seeds that tie ({', '.join(tied['sources'])}: a spread of 0 on {tied['df']} "
        f"degree{'s' if tied['df'] != 1 else ''} of freedom): that says nothing of how far a new "
        "seed would move it, so it is judged as on one seed"
    )


def _caution(boot: dict, judged: tuple[str, int] | None, what: str = "") -> str:
    """The caution of a verdict judged on the examples alone: tied seeds, or one seed."""
    tied = boot.get("seeds_tied")
    return tied_caution(tied, what) if tied else one_seed_caution(judged, what)


def _broken_on_one_seed(rails: list[dict], judged: tuple[str, int] | None = None) -> list[str]:
    """The caution for a guardrail broken on an interval over the examples alone."""
    broke = [
        c
        for g in rails
        if g["status"] == BROKEN
        for c in g.get("checks", {}).values()
        if c.get("status") == BROKEN
    ]
    if all(c.get("basis") == SEEDS for c in broke):
        return []
    tied = next((c["seeds_tied"] for c in broke if c.get("seeds_tied")), None)
    what = "the guardrail was judged on "
    return [tied_caution(tied, what) if tied else one_seed_caution(judged, what)]


def _held_on_ties(rails: list[dict]) -> list[str]:
    """The caution for guardrail checks that held where their seeds tie, beside a verdict
    judged over seeds: their interval is the examples' alone."""
    held = [
        f"{g['metric']} {name}"
        for g in rails
        for name, c in g.get("checks", {}).items()
        if c.get("status") == HOLDS and c.get("seeds_tied")
    ]
    if not held:
        return []
    return [
        f"held over the examples alone, the seeds scoring alike on them: {', '.join(held[:4])}"
        + (f" and {len(held) - 4} more" if len(held) > 4 else "")
        + "; how far a new seed would move them is not measured"
    ]


def excludes_zero(interval: dict) -> bool:
    return interval["low"] > 0 or interval["high"] < 0


def judged_verdict(interval: dict, min_effect: float) -> str:
    """The verdict of one combined interval (`combine`) with no guardrail in the way."""
    if interval["high"] < 0:
        return WORSE if interval["basis"] == SEEDS else WORSE_ONE_SEED
    if interval["delta"] >= min_effect - ROUNDING and interval["low"] > 0:
        return IMPROVED if interval["basis"] == SEEDS else ONE_SEED
    seeds_rule_it_out = excludes_zero(interval)  # a real difference, below the minimum effect
    if interval["basis"] == SEEDS and excludes_zero(interval["example"]) and not seeds_rule_it_out:
        return SEED_NOISE
    return NO_EVIDENCE


def _too_few_changed(versus: dict) -> str | None:
    """Why a one-seed verdict on a primary that is McNemar's own share of examples right is
    not one: the exact test cannot tell its few changed examples from chance; nor one over few
    examples that the sign-flip test (a mean of partial credits) or the swap test (any other
    metric: macro-F1, bits per byte) cannot."""
    mcnemar = versus.get("mcnemar")
    for key, name in (("sign_flip", "sign-flip"), ("swap", "swap")):
        paired = versus.get(key)
        if paired and paired["p_value"] >= MCNEMAR_LEVEL:
            return (
                f"on {paired['n']} example(s) ({paired['changed']} changed) the paired {name} "
                f"test gives p = {paired['p_value']:.3g}, which cannot tell that from chance, "
                "though the bootstrap's interval excludes zero (too narrow on so few)"
            )
    if not mcnemar or not mcnemar.get("tests_primary") or mcnemar["p_value"] < MCNEMAR_LEVEL:
        return None
    changed = mcnemar["fixed"] + mcnemar["broken"]
    return (
        f"only {changed} example(s) changed ({mcnemar['fixed']} fixed, {mcnemar['broken']} "
        f"broken): McNemar's exact test gives p = {mcnemar['p_value']:.3g}, which cannot tell "
        "that from chance, though the bootstrap's interval excludes zero (too narrow on so few)"
    )


def interval_text(metric: str, boot: dict) -> str:
    """`macro_f1 +2.1 points (95% CI +0.4 to +3.8, seeds and examples)`."""
    return f"{metric} {units.gain(metric, boot)}"


def _remedy(rails: list[dict], judged: tuple[str, int] | None = None) -> str:
    """What would resolve the unresolved guardrails, from their checks: more seeds where the
    seeds' spread keeps an interval across its limit (for `judged`, the run and the seeds it
    has: the command that adds them), more validation examples (or documents of a forgetting
    guardrail's text) where the examples' does, a score where none was made."""
    more = f"more seeds ({noise_command(judged)})"
    needs: list[str] = []
    for g in rails:
        if g["status"] != UNRESOLVED:
            continue
        for name, c in g.get("checks", {}).items():
            if c.get("status") != UNRESOLVED:
                continue
            if c.get("needs") == "more seeds":
                need = more
            elif "not_checked" in c:
                need = f"every run scored on {g['on']}" if g.get("on") else f"{name} measured"
            else:
                need = f"more documents in {g['on']}" if g.get("on") else "more validation examples"
            if need not in needs:
                needs.append(need)
    return " and ".join(needs) or "more validation examples"


def verdict(
    versus: dict,
    hypothesis: Hypothesis | None,
    accept_unresolved: str | None,
    seed_only: str | None = None,
    judged: tuple[str, int] | None = None,
) -> tuple[str | None, list[str]]:
    """See VERDICT_RULE; `seed_only` names the run this one differs from only in its seed;
    `judged`: the run judged and how many seeds it has (for what would resolve a guardrail). A
    concentrated gain is added to the reasons, never a verdict."""
    c = versus["concentration"]
    extra = (
        [concentration_note(c, versus["flips"], versus["metric"], several_seeds(versus))]
        if c["concentrated"]
        else []
    )
    if hypothesis is None:
        return None, [
            "the reference was recorded without a hypothesis: metrics only, no verdict "
            "(state `hypothesis` in the spec and re-run the baseline and variants)"
        ]
    boot = versus["bootstrap"]
    metric = hypothesis.metric
    reasons = [f"{interval_text(metric, boot)}, {units.effect(metric, hypothesis.min_effect)}"]
    if boot["basis"] == SEEDS:
        ex = boot["example"]
        reasons.append(
            f"over the examples alone {units.span(metric, ex['delta'], ex['low'], ex['high'])}"
        )
    if seed_only:
        return SEED_NOISE, [
            f"only training.seed differs from {seed_only}: the difference measures the noise "
            "of training, not a cause",
            *reasons,
        ]
    rails = versus["guardrails"]
    broken = [describe(g) for g in rails if g["status"] == BROKEN]
    unresolved = [describe(g) for g in rails if g["status"] == UNRESOLVED]
    word = judged_verdict(boot, hypothesis.min_effect)
    too_few = _too_few_changed(versus)
    if word in (ONE_SEED, WORSE_ONE_SEED) and too_few:
        return NO_EVIDENCE, [*reasons, too_few, _caution(boot, judged), *unresolved, *extra]
    if word in LOSSES:
        one_seed = [_caution(boot, judged)] if word == WORSE_ONE_SEED else []
        return word, [*reasons, "the whole interval is below zero", *one_seed, *broken, *extra]
    if broken:
        return BROKEN_VERDICT, [*broken, *reasons, *_broken_on_one_seed(rails, judged), *extra]
    if word in (IMPROVED, ONE_SEED):
        if word == ONE_SEED:
            reasons.append(_caution(boot, judged))
        else:  # over seeds: a guardrail that held on tied seeds held on the examples alone
            reasons += _held_on_ties(rails)
        if not unresolved:
            return word, reasons + extra
        if accept_unresolved:
            return word, [
                *reasons,
                *unresolved,
                f"unresolved guardrails accepted: {accept_unresolved}",
                *extra,
            ]
        return UNRESOLVED_VERDICT, [
            *reasons,
            *unresolved,
            f"an unresolved guardrail blocks `improved`: {_remedy(rails, judged)}, or accept it "
            'with `tunelab compare --accept-unresolved "why"` (recorded)',
            *extra,
        ]
    if word == SEED_NOISE:
        return SEED_NOISE, [
            *reasons,
            "the examples alone exclude zero, the seeds' noise does not: a new seed could "
            "have produced this difference",
            *unresolved,
            *extra,
        ]
    if boot["low"] == boot["high"] == 0:
        reasons.append(
            f"every example's {metric} was the same in both runs: no difference in it at all"
        )
    elif boot["low"] <= 0:
        reasons.append("the interval includes zero")
    if boot["delta"] < 0:
        reasons.append("the estimate is a loss, not a gain")
    elif boot["delta"] == 0 and boot["low"] != boot["high"]:
        reasons.append("the estimate is zero: the gains and the losses cancel")
    elif boot["delta"] < hypothesis.min_effect - ROUNDING:
        reasons.append("the estimate is below the minimum effect")
    return NO_EVIDENCE, [*reasons, *unresolved, *extra]


def concentration_note(c: dict, f: dict, metric: str, first_seeds: bool = False) -> str:
    """Where the gain comes from, in the units of each example's value (`measure`: a
    classifier's correctness, so accuracy, beside a macro-F1 primary): without the most improved
    examples, the mean change over the others (it read "it is -1.1 points" beside macro-F1).
    `first_seeds`: the arms have several seeds, and this is their first seeds' (it sat beside a
    five-seed interval that excluded zero, unlabelled)."""
    rest, others = c["delta_without_top_k"], c["n"] - c["k"]
    measure = c.get("measure", metric)  # a record before it said which
    if measure in lower_is_better:
        without = f"{rest:+.4f} (a reduction is the gain)"
    else:
        without = f"{100 * rest:+.1f} points"
    net = f", net {f['net']} <= {c['k']}" if f["net"] <= c["k"] else ""  # true of 0/1 values
    up, down = ("better", "worse") if measure in lower_is_better else ("fixed", "broken")
    between = ", between the arms' first seeds" if first_seeds else ""
    return (
        f"the gain comes from a handful of examples{between}: without the {c['k']} most "
        f"improved of {c['n']}, the mean change in {measure} over the other {others} is "
        f"{without} ({up} {f['fixed']['count']}, {down} {f['broken']['count']}{net})"
    )
