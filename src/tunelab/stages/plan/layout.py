"""The rental cut into phases: pure arithmetic on the figures (`figures.py`), no records read.

The phases, in order:

1. initial checks: SETUP_S (one hour to copy the lab, install and load the model on the rented
   machine: a rule, not a measurement) + `check_s` (a new platform means the checks are redone;
   `tunelab size` records no duration, so its probes are inside the allowance).
2. experiments: whatever the other phases leave. A variant of the current budget takes
   `variant_s`; `variants.fit` is how many fit whole, one after another, and the last must start
   by `variants.last_start_hour`.
3. evaluation: the final on test, `final_s`.
4. recovery buffer, the rule: max(BUFFER_SHARE = 15% of the rental, one variant + one
   checkpoint reload in a fresh process, `variant_s + reload_s`): room to resume a crashed or
   lost run from its checkpoint, or to redo one variant whole. Only a rental too short for it
   shrinks it (to what the other fixed phases leave), with a warning.
5. export and verify, `export_s + verify_s`.

Hours are whole quarter hours: the fixed phases and the buffer are rounded up (never
optimistic), the experiments take the rest, so the phases add up to the rental exactly (a
quarter is exact in binary floating point, and so is any sum of them). A rental shorter than
the fixed phases alone is refused.
"""

from __future__ import annotations

import math

from tunelab.core.durations import seconds
from tunelab.stages.plan.records import PlanError

SETUP_S = 3600.0
"""Set-up on the rented machine (copy the lab, install, load the model): a rule, not measured."""
BUFFER_SHARE = 0.15
"""The recovery buffer is at least this share of the rental, and at least one variant plus a
checkpoint reload in a fresh process."""
QUARTER_S = 900
"""Every phase is a whole number of quarter hours."""
MANY_VARIANTS = 1000
"""More variants than a one-change-at-a-time search runs (a few levers, a few values each, some
seeds: tens to hundreds): past this the plan says the rental outruns the budget per variant."""
PHASES = ("initial checks", "experiments", "evaluation", "recovery buffer", "export and verify")


def quarters_up(seconds: float) -> int:
    """Whole quarter hours that hold `seconds` (a float's last bit never adds a quarter)."""
    return max(0, math.ceil(round(seconds / QUARTER_S, 9)))


def layout(
    days: int, fig: dict, counts: dict[str, int], seeds: int = 1, noise_runs: int = 0
) -> dict:
    """`hours_total`, `phases` (each with its hours, start and end hour, what is done, what the
    figure is based on), `variants`, `warnings` and the buffer `rule`. Each variant trains
    `seeds` runs (`training.replicates`), and `noise_runs` runs measure the noise floor first
    (`tunelab noise`, when the lab has none and the variants run one seed each)."""
    s, src = fig["seconds"], fig["sources"]
    total = days * 24 * 3600 // QUARTER_S
    rule_s = max(BUFFER_SHARE * total * QUARTER_S, s["variant_s"] + s["reload_s"])
    q = {
        "initial checks": quarters_up(SETUP_S + s["check_s"]),
        "evaluation": quarters_up(s["final_s"]),
        "export and verify": quarters_up(s["export_s"] + s["verify_s"]),
    }
    fixed = sum(q.values())
    if fixed > total:
        raise PlanError(
            f"a {days}-day rental ({days * 24} h) is shorter than its fixed phases alone "
            f"({fixed * QUARTER_S / 3600:g} h: checks, the final evaluation, export and verify); "
            "rent longer, or measure a faster device (--device, --tokens-per-second)"
        )
    q["recovery buffer"] = min(quarters_up(rule_s), total - fixed)
    q["experiments"] = total - fixed - q["recovery buffer"]
    runs_fit = math.floor(q["experiments"] * QUARTER_S / s["variant_s"] + 1e-9)
    fit = max(0, runs_fit - noise_runs) // seeds
    phases, start = [], 0
    for name in PHASES:
        phases.append(
            {
                "name": name,
                "hours": q[name] / 4,
                "start_hour": start / 4,
                "end_hour": (start + q[name]) / 4,
                "what": _what(name, fit, counts, seeds, noise_runs),
                "based_on": _based_on(name, s, src, rule_s),
            }
        )
        start += q[name]
    experiments = phases[1]
    variants = _variants(fit, fig, experiments)
    variants.update(seeds=seeds, noise_runs=noise_runs, runs=fit * seeds + noise_runs)
    return {
        "hours_total": total / 4,
        "phases": phases,
        "variants": variants,
        "buffer_rule": {
            "hours": round(rule_s / 3600, 3),
            "rule": f"max({BUFFER_SHARE:.0%} of the rental, one variant + one checkpoint reload)",
        },
        "warnings": _warnings(q, quarters_up(rule_s), fit, variants, experiments),
    }


def _variants(fit: int, fig: dict, experiments: dict) -> dict:
    each = fig["seconds"]["variant_s"]
    end = experiments["end_hour"]
    last = math.floor((end - each / 3600) * 100) / 100 if fit else None
    steps = fig["steps"]
    if fit:
        stop = (
            f"{_count(fit)} of {steps} steps ({seconds(each, hours=False)} each): start the "
            f"last by hour {last:.2f} so it ends by hour {end:g}, then stop, `tunelab compare`, "
            "and choose one run on validation for the final"
        )
    else:
        stop = "no variant of the current budget fits: lower training.budget or rent longer"
    return {
        "fit": fit,
        "hours_each": round(each / 3600, 3),
        "seconds_each": round(each, 1),
        "overhead_each": round(fig["seconds"]["overhead_s"], 1),  # evaluation and saving
        "steps_each": steps,
        "steps_source": fig["steps_source"],
        "last_start_hour": last,
        "stop_after": stop,
    }


def _count(n: int) -> str:
    return f"{n:,} variant" + ("" if n == 1 else "s")


def _what(name: str, fit: int, counts: dict[str, int], seeds: int, noise_runs: int) -> str:
    noise = (
        f"`tunelab noise` first ({noise_runs} more seeds of the first variant), then "
        if noise_runs
        else ""
    )
    each = f" × {seeds} seeds" if seeds > 1 else ""
    return {
        "initial checks": "set up the rented machine, then `tunelab check` and `tunelab size` "
        "there: a new platform means the checks are redone",
        "experiments": f"{noise}up to {_count(fit)}{each} of the current budget, one change "
        "each, then `tunelab compare`",
        "evaluation": f"`tunelab final RUN`: the chosen run, once, on the sealed test split "
        f"({counts.get('test', 0)} rows)",
        "recovery buffer": "room for a crash or a lost process: `tunelab resume` reloads the "
        "checkpoint in a fresh process and continues, or one variant is redone whole",
        "export and verify": "`tunelab export RUN`, then `tunelab verify BUNDLE` reproduces a "
        "validation metric in a fresh process, before the rental ends",
    }[name]


def _based_on(name: str, s: dict, src: dict, rule_s: float) -> str:
    def f(*keys: str) -> str:
        return "; ".join(f"{k} {seconds(s[k])} ({src[k]})" for k in keys)

    return {
        "initial checks": f"set-up allowance {seconds(SETUP_S)} (a rule, not measured) + "
        + f("check_s"),
        "experiments": "what the other phases leave, in variants of "
        + f("variant_s", "step_s", "overhead_s"),
        "evaluation": f("final_s", "eval_row_s", "reload_s"),
        "recovery buffer": f"the rule max({BUFFER_SHARE:.0%} of the rental, variant_s + "
        f"reload_s) = {seconds(rule_s)}; " + f("variant_s", "reload_s"),
        "export and verify": f("export_s", "verify_s"),
    }[name]


def _warnings(q: dict, rule_q: int, fit: int, variants: dict, experiments: dict) -> list[str]:
    out = []
    buffer = q["recovery buffer"]
    if buffer == 0:
        out.append(
            "the plan has no recovery buffer: the fixed phases take the whole rental, so a "
            "crash or a lost run ends it before the export; rent longer"
        )
    elif buffer < rule_q:
        out.append(
            f"the recovery buffer is {buffer / 4:g} h, short of its rule's {rule_q / 4:g} h "
            f"(max({BUFFER_SHARE:.0%} of the rental, one variant + a checkpoint reload)): a "
            "crashed variant could not be redone; rent longer or lower training.budget"
        )
    if fit > MANY_VARIANTS:
        out.append(
            f"{fit:,} variants of {variants['seconds_each']:,.0f} s fit: far more than a "
            "one-change-at-a-time search needs, so most of this rental would sit idle; a larger "
            "budget per variant (training.budget: more steps, more data) or a larger model is "
            "what such a rental is for, or run the search where it was measured"
        )
    if fit == 0:
        out.append(
            f"the variants do not fit: one of the current budget ({variants['steps_each']} "
            f"steps) takes {variants['hours_each']:g} h and the experiments phase has "
            f"{experiments['hours']:g} h; lower training.budget or rent longer"
        )
    return out
