"""What compare says beside a verdict: what sets a variant's pair apart from a fair comparison
(a concentrated gain, another platform, compute, precision or evaluation protocol, a run that
diverged or trained past blocking findings), and what choosing the best of several variants
costs."""

from __future__ import annotations

from collections import Counter

from tunelab.core.allowed import past_words, trained_past
from tunelab.core.replicates import several_seeds
from tunelab.stages.compare.compute import compute_differences, text_differences
from tunelab.stages.compare.platform import env_differences, process_differences
from tunelab.stages.compare.rules import concentration_note
from tunelab.stages.compare.two_level import SEEDS

SAID_AGAIN = frozenset({"answer_longer_than_generation", "scored_past_trained_length"})
"""The inspect findings recorded with a run that compare repeats beside its verdict: each says
the score measures something besides the change."""


def pair_warnings(before: dict, run: dict, versus: dict) -> list[str]:
    """Concentrated gain, a different platform, a run trained past blocking findings or in
    another precision, a different evaluation protocol."""
    out = []
    c = versus["concentration"]
    if c["concentrated"]:
        out.append(concentration_note(c, versus["flips"], versus["metric"], several_seeds(versus)))
    env = env_differences(before.get("env"), run.get("env")) + process_differences(before, run)
    if env:
        out.append(
            f"{run['id']} ran on a different platform than {before['id']}: "
            + ", ".join(env)
            + "; a new platform means the checks are redone (`tunelab check`, in one process)"
        )
    out.extend(compute_differences(before, run))
    out.extend(text_differences(before, run))
    for said in ("start_lost", "diverged", "time_cap"):
        went = (run.get("training") or {}).get(said)
        if went and went.get("message"):  # a time cap that cut nothing says nothing
            out.append(f"{run['id']}: {went['message']}")
    out.extend(_validation_notes(run))
    past = trained_past(run)
    if past:
        out.append(past_words(run["id"], past))
    for f in run.get("findings") or []:  # a score no training can move, or one that measures
        if f.get("code") in SAID_AGAIN:  # what the runs did not train at
            out.append(f"{run['id']}: {f['message']}")
    routing = ((run.get("metrics") or {}).get("routing") or {}).get("warning")
    if routing:  # an experts variant's router: a verdict on it reads its routing too
        out.append(f"{run['id']}: {routing}")
    used = [((r.get("training") or {}).get("precision") or {}).get("used") for r in (before, run)]
    if all(used) and used[0] != used[1]:
        out.append(
            f"{run['id']} trained in {used[1]}, {before['id']} in {used[0]}: the difference "
            "mixes the change with the precision"
        )
    pa, pb = before.get("protocol"), run.get("protocol")
    if pa and pb and pa != pb:
        keys = sorted(k for k in set(pa) | set(pb) if pa.get(k) != pb.get(k))
        out.append(
            f"{run['id']} was evaluated under a different protocol than {before['id']}: "
            + ", ".join(f"{k} {pa.get(k)} -> {pb.get(k)}" for k in keys)
        )
    return out


def multiplicity(rows: list[dict], reference: str) -> str | None:
    """Several variants judged against one reference: the best of them is chosen after the
    fact, and each interval is a single test's. What that costs, said where a gain is claimed."""
    judged = [r for r in rows if "vs_reference" in r]
    gains = [r["id"] for r in judged if str(r.get("verdict") or "").startswith("improved")]
    k = len(judged)
    if k < 2 or not gains:
        return None
    seeded = sum(r["vs_reference"]["bootstrap"].get("basis") == SEEDS for r in judged)
    text = f"{k} variants were judged against {reference}, each on its own 95% interval"
    if seeded == 1:
        text += ": the one judged over its seeds would read improved by chance 2.5% of the time"
    elif seeded:
        chance = 1 - (1 - 0.025) ** seeded  # one-sided: wholly above zero by chance alone
        of = "them" if seeded == k else f"the {seeded} judged over their seeds"
        text += (
            f": were none of {of} better, one or more would read improved about {chance:.0%} "
            "of the time, not 2.5%"
        )
    if seeded < k:  # one seed: the interval's 2.5% counts the examples' noise, not a new seed's
        one = k - seeded
        text += (
            f"{';' if seeded else ':'} {one} {'is' if one == 1 else 'are'} judged on one seed, "
            "over the examples alone, and a new seed's luck can read improved on one seed more "
            "often than 2.5% of the time: how much more depends on the seeds' noise, which is "
            "not measured (in bench/false_gains.py a quarter of such comparisons at 500 "
            "examples, about 3% at 50)"
        )
    return (
        f"{text}; the best of {k} is the one most likely lifted by chance. The sealed test split "
        "(`tunelab final` on the one chosen) is the check that shares no such choosing"
    )


def untrained_reference(reference: dict, runs: list[dict]) -> str | None:
    """A from-scratch lab's baseline is an untrained model, and the strongest-baseline rule
    picks it where no other baseline is: every run that trains beats it, so the verdicts say
    that training trained, not what a variant's change did (a plain `compare` after the
    ablation demo read GQA, NoPE and MoE "improved" where the demo had found seed noise).
    Names the run the variants change, as their `parent`, when they name one."""
    if reference["kind"] != "baseline":
        return None
    if ((reference.get("spec") or {}).get("model") or {}).get("init") != "scratch":
        return None
    trained = {r["id"] for r in runs if r["kind"] != "baseline"}
    parents = Counter(
        r["parent"] for r in runs if r["kind"] == "variant" and r.get("parent") in trained
    )
    text = (
        f"the reference {reference['id']} is this from-scratch lab's untrained model "
        "(model.init: scratch): every run that trains beats it, so these verdicts say that "
        "training trained, not what a variant's change did; "
    )
    if parents:
        parent = parents.most_common(1)[0][0]
        return text + (
            f"an ablation is judged against the run its variants change: "
            f"`tunelab compare --against {parent}`"
        )
    return text + "judge the variants against a trained run: `tunelab compare --against RUN`"


def _validation_notes(run: dict) -> list[str]:
    """What validation during training recorded: the overfitting warning, and the step whose
    weights were kept when not the last (its metrics are that step's)."""
    training = run.get("training") or {}
    went = (training.get("validation") or {}).get("overfitting")
    kept = training.get("kept") or {}
    out = [f"{run['id']}: {went['message']}"] if went else []
    if kept.get("rule") == "best validation loss" and kept.get("step") != training.get("steps"):
        out.append(
            f"{run['id']} kept step {kept['step']}'s weights of its {training.get('steps')} "
            f"(training.keep: best, validation loss {kept['validation_loss']:.4f}): its "
            "metrics are that step's"
        )
    return out
