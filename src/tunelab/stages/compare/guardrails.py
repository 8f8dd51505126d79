"""Guardrails as non-inferiority tests on the paired bootstrap, never on point estimates.

For a guardrail "metric must not drop by more than `max_drop`", the paired bootstrap gives
an interval (low, high) for metric(variant) - metric(reference) on the same examples:

- *holds* when low >= -max_drop: even the pessimistic end of the interval is within the limit
  (a limit of 0, "no drop", holds when no resampling of the examples shows a drop: on every
  example the variant scored at least what the reference did);
- *broken* when high < -max_drop: even the optimistic end drops more than allowed;
- *unresolved* otherwise: these examples cannot tell. `needed_n` says how many validation
  examples would resolve it at the observed variance (the interval narrows as 1/sqrt(n)); on a
  seed-aware interval (`two_level.py`) more examples do not shrink the seeds' part, and
  `needs: more seeds` says so instead.

A per-class (or per-field) guardrail bootstraps that class's own metric; it is broken when
any class is broken, unresolved when none is broken but one is unresolved, else it holds.

Where no example of a group got worse, no resample of them can drop, and the bootstrap's low
end sits at zero or above however few they are: 4 examples alike in both runs read "holds" on
+0.0 (+0.0 to +0.0). A limit above 0 is a claim beyond these examples, so the low end is then
the gain seen less the exact binomial bound on the share of the group a variant could make
worse unseen in `n` examples (`unseen_drop`: 1 - 0.025^(1/n), 60 points for 4, 3.7/n for
many), where that is lower: with no gain, the check holds only where the group has the
examples to see a drop of the limit's size. Where some got worse and the metric is the share
of the group's examples right, judged on the examples, the same holds with the exact bound on
`worse` of `n` (Clopper-Pearson, `worse_share`): the percentile bootstrap's low end sat above
the bound on none, so one example worse held where none was unresolved. A limit of 0 stays a
rule about these examples: it holds when none of them got worse.
"""

from __future__ import annotations

import math

from tunelab.core.spec import Guardrail
from tunelab.stages.compare.pairs import Pair
from tunelab.tasks import units
from tunelab.tasks.resampled import UNSEEN_TAIL, unseen_share, worse_share

HOLDS, BROKEN, UNRESOLVED = "holds", "broken", "unresolved"
GUARDRAIL_RULE = (
    "holds: low >= -max_drop; broken: high < -max_drop; else unresolved; for a limit above 0 "
    "on a rate, low is at most the gain seen less the exact binomial bound on the share of "
    "the group that could get worse (none seen worse), or, for a share of examples right "
    "judged on the examples, the share fixed less that bound on the share seen worse"
)


ROUNDING = 1e-9
"""How far apart two numbers may be and still be one, where a rule meets a limit: a change is a
difference of floats (82% - 80% of 1,000 examples is 0.019999999999999907), and a gain of exactly
the minimum effect, or a drop of exactly the limit, had missed it. Far below any difference a
validation set can show (one example in a billion)."""


def status_of(boot: dict, max_drop: float) -> str:
    if boot["low"] >= -max_drop - ROUNDING:
        return HOLDS
    if boot["high"] < -max_drop - ROUNDING:
        return BROKEN
    return UNRESOLVED


def unseen_drop(n: int) -> float:
    """The largest share of a group that could get worse, at 97.5%, when none of its `n`
    examples did (exact binomial: (1 - p)^n = 0.025)."""
    return unseen_share(n)


def examples_to_see(max_drop: float) -> int:
    """The examples whose being none worse bounds a drop within `max_drop`."""
    return math.ceil(math.log(UNSEEN_TAIL) / math.log(1 - max_drop))


def _bounded(check: dict, g: Guardrail, pair: Pair, name: str | None) -> dict:
    """A check for a limit above 0 on a rate, where the bootstrap's low end is too high:
    - its bootstrap cannot show a drop (low >= 0, on the examples' noise): the low end becomes
      the gain seen less the unseen drop its group's size allows, where that is lower (a
      seed-aware check too: seeds add no examples);
    - the metric is the share of the group's examples right, judged on the examples: the low
      end becomes the share fixed less the exact binomial bound on the share worse
      (`worse_share`), where that is lower. On one example worse the percentile bootstrap sat
      above the bound on none, so a guardrail unresolved with none worse held with one."""
    if g.max_drop <= 0 or pair.documents:
        return check
    size = pair.group_size(name)
    if not size:
        return check
    if check["low"] >= 0:
        bound = unseen_drop(size)
        low = round(min(check["low"], check["delta"] - bound), 4)  # the gain seen, less unseen
        unseen = {"examples": size, "bootstrap_low": check["low"]}
    elif "basis" not in check and (changed := pair.changed(g.metric, name)):
        fixed, worse, n = changed
        low = round(min(check["low"], fixed / n - worse_share(worse, n)), 4)
        if low == check["low"]:
            return check
        unseen = {"examples": n, "worse": worse, "fixed": fixed, "bootstrap_low": check["low"]}
    else:
        return check
    status = status_of({"low": low, "high": check["high"]}, g.max_drop)
    bounded = check | {
        "low": low,
        "status": status,
        "margin": round(low + g.max_drop, 4),
        "unseen": unseen,
    }
    if status == UNRESOLVED:
        n = len(pair.ids)
        if unseen.get("worse"):  # toward holding at the rates seen; else toward broken
            group = _needed_share(unseen["fixed"], unseen["worse"], unseen["examples"], g.max_drop)
            needed = (
                needed_n({"low": low, "high": check["high"]}, g.max_drop, n)
                if group is None
                else math.ceil(group * n / unseen["examples"])
            )
        else:
            needed = math.ceil(n * examples_to_see(g.max_drop) / size)
        bounded |= {"needed_n": needed, "examples": n}
    return bounded


def _needed_share(fixed: int, worse: int, n: int, max_drop: float) -> int | None:
    """The examples of a group that would resolve its exact bound at the rates seen (`fixed`
    and `worse` of `n`): the fewest m where the share fixed less the bound on round(m x the
    share worse) of m clears the limit; None where the rates themselves drop past it (more
    examples would show it broken, not holding). Scaled from the widened interval's width it
    read 918 for 1 worse of 89 at a 4-point limit, where 178 do (an audit saw 4 to 21 times
    too many)."""
    fixed_rate, worse_rate = fixed / n, worse / n
    if fixed_rate - worse_rate <= -max_drop - ROUNDING:
        return None

    def clears(m: int) -> bool:
        return fixed_rate - worse_share(round(worse_rate * m), m) >= -max_drop - ROUNDING

    low, high = n, n
    while not clears(high):
        low, high = high, high * 2
        if high > 10**8:
            return None
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if clears(mid) else (mid, high)
    return high


def needed_n(boot: dict, max_drop: float, n: int) -> int | None:
    """Examples that would resolve an unresolved guardrail at the observed variance: the
    interval's half-width shrinks as 1/sqrt(n) until it no longer reaches -max_drop. None when
    the difference sits on the limit itself (no n resolves it)."""
    centre = (boot["low"] + boot["high"]) / 2
    distance = abs(centre + max_drop)
    if distance < 1e-9:
        return None
    half = (boot["high"] - boot["low"]) / 2
    return max(n + 1, math.ceil(n * (half / distance) ** 2))


def needed_words(c: dict) -> str:
    """`~173 examples`, and where that is far past those compared, how far: `~557,278 examples
    (6,124x these 91)`, the sign of a change that sits on the limit itself."""
    text = f"~{c['needed_n']:,} examples"
    n = c.get("examples")
    if n and c["needed_n"] > 10 * n:
        text += f" ({c['needed_n'] / n:,.0f}x these {n:,})"
    return text


def judge(
    g: Guardrail, pair: Pair, groups: list[str] | None, unscored: dict[str, str] | None = None
) -> dict:
    """One guardrail on one pair of runs: each scope's interval, status and margin. A group in
    `unscored` (a source without validation rows: name -> why) is not checked, so the
    guardrail cannot hold: it is unresolved unless another group is broken."""
    unscored = unscored or {}
    if g.scope == "overall":
        names = [None]
    elif g.source is not None:  # one named source (task pretrain)
        names = [g.source]
    else:
        names = [*(groups or []), *(n for n in unscored if n not in (groups or []))]
    checks = {}
    for name in names:
        if name in unscored:
            checks[name] = {"status": UNRESOLVED, "not_checked": unscored[name]}
            continue
        boot = pair.interval(g.metric, name)
        status = status_of(boot, g.max_drop)
        check = {
            "delta": round(boot["delta"], 4),
            "low": round(boot["low"], 4),
            "high": round(boot["high"], 4),
            "status": status,
            "margin": round(boot["low"] + g.max_drop, 4),
        }
        if boot.get("basis") == "seeds and examples":
            check["basis"] = boot["basis"]
        elif boot.get("seeds_tied"):
            check["seeds_tied"] = boot["seeds_tied"]
        if status == UNRESOLVED and "basis" in check:  # the seeds' part does not shrink with n
            check["needs"] = "more seeds"
        elif status == UNRESOLVED:
            check["needed_n"] = needed_n(boot, g.max_drop, len(pair.ids))
            check["examples"] = len(pair.ids)
        checks[name or "overall"] = _bounded(check, g, pair, name)
    statuses = {c["status"] for c in checks.values()}
    status = BROKEN if BROKEN in statuses else UNRESOLVED if UNRESOLVED in statuses else HOLDS
    measured = [k for k in checks if "not_checked" not in checks[k]]
    missing = [k for k in checks if k not in measured]
    # the group that decides the status: of equal low ends (intervals cut at -100 points),
    # the one whose whole interval lies lowest, never an unresolved class beside a broken one
    decides = [k for k in measured if checks[k]["status"] == status] or measured
    worst = (
        missing[0]  # what keeps it from holding, unless a measured group is broken
        if missing and status != BROKEN
        else min(decides, key=lambda k: (checks[k]["low"], checks[k]["high"], checks[k]["delta"]))
    )
    return {
        "metric": g.metric,
        "scope": g.scope,
        "max_drop": g.max_drop,
        "status": status,
        "passed": status == HOLDS,
        "worst": worst,
        "checks": checks,
    }


def describe(g: dict) -> str:
    """`macro_f1 (every_class) unresolved: sport -2.1 points (-5.8 to +1.2); limit -2.0 points`;
    a lower-is-better metric's change as the metric moved (`+0.0570 (+0.0510 to +0.0629)`)."""
    head = f"{g['metric']} ({g['scope']})" + (f" on {g['on']}" if g.get("on") else "")
    missing = [c["not_checked"] for c in g["checks"].values() if "not_checked" in c]
    shown = [
        (name, c)
        for name, c in g["checks"].items()
        if "not_checked" not in c and (c["status"] == g["status"] or g["status"] == HOLDS)
    ]
    limit = units.limit(g["metric"], g["max_drop"])
    if missing and not shown:
        return f"{head} {g['status']}: not checked ({'; '.join(missing)}); {limit}"
    parts = []
    for name, c in shown[:3]:
        text = f"{name} {units.change(g['metric'], c)}"
        if c.get("unseen") and c["status"] != HOLDS:
            worse, n = c["unseen"].get("worse", 0), c["unseen"]["examples"]
            text += (
                f" ({worse} of its {n} examples got worse: the exact binomial bound on the "
                "share that could, too wide to rule out a drop of the limit's size)"
                if worse
                else f" (none of its {n} examples got worse: too few to rule out an unseen drop "
                "of the limit's size)"
            )
        if g["max_drop"] == 0 and c["status"] == HOLDS:  # a rule about these examples only
            text += " (no example worse: said of these examples, not of those to come)"
        if c.get("seeds_unscored"):  # `forgetting`: held on the documents alone
            text += f" on the documents alone ({c['seeds_unscored']}, the seeds' noise unmeasured)"
        if c.get("needed_n"):
            text += f", {needed_words(c)} would resolve it"
        elif c.get("needs"):
            text += f", {c['needs']} would resolve it (more validation examples would not)"
        parts.append(text)
    rest = [name for name, _ in shown[3:]]
    more = f"; also {g['status']}: {', '.join(rest)}" if rest else ""
    unchecked = f"; not checked: {'; '.join(missing)}" if missing else ""
    return f"{head} {g['status']}: " + "; ".join(parts) + more + unchecked + f"; {limit}"
