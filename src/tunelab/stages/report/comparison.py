"""The report's comparison section: every variant's interval against the reference as a forest
plot (points for a share, the metric's own unit for bits per byte, loss and perplexity), each
guardrail's intervals, and the seeds' noise floor as a band around zero."""

from __future__ import annotations

from markupsafe import Markup

from tunelab.core.param_groups import changes_text
from tunelab.core.replicates import reference_arm
from tunelab.stages.report import charts
from tunelab.tasks import units
from tunelab.tasks.pretrain import overall_metrics as PLAIN


def comparison(record: dict, runs: list[dict] = ()) -> dict:
    """The newest comparison: every run's metrics, each variant's interval and guardrails, and
    which of `runs` (the lab's valid run records) it did not judge: a completed run of its
    data version made after it had no verdict anywhere on the page, where the comparison read
    "every run beside the reference"."""
    primary, reference = record.get("primary_metric"), record.get("reference")
    judged = {r["id"] for r in record["runs"]}
    unjudged = [
        r["id"]
        for r in runs
        if r.get("status") == "completed"
        and r.get("data_version") == record.get("data_version")
        and r["id"] not in judged
    ]
    variants = [r for r in record["runs"] if r.get("vs_reference")]
    # a rate in points; bits per byte, loss, perplexity as they are, each delta a reduction
    scale, unit = (1, "higher is better") if primary in PLAIN else (100, "points")
    forest = [
        _interval(r["id"], r["vs_reference"]["bootstrap"], r.get("verdict"), scale)
        for r in variants
    ]
    marks = []
    if record.get("min_effect"):
        effect = scale * record["min_effect"]
        marks = [(effect, f"minimum effect +{effect:g}")]
    level = 100 * ((record.get("rules") or {}).get("bootstrap") or {}).get("level", 0.95)
    what = f"{primary} reduction" if primary in PLAIN else f"Δ {primary}"
    xlabel = f"{what} against {reference}, {unit} ({level:g}% interval)"
    return {
        "id": record.get("id"),
        "created": record.get("created"),
        "reference": reference,
        "primary": primary,
        "min_effect": record.get("min_effect"),
        "metrics": record.get("metrics") or [],
        "rules": record.get("rules") or {},
        "runs": record["runs"],
        "unjudged": unjudged,
        "reference_arm": reference_arm(record),
        "multiplicity": record.get("multiplicity"),
        "reference_note": record.get("reference_note"),
        # McNemar's test pairs right and wrong answers: a column only where a row has one
        "mcnemar": any(
            (r.get("vs_reference") or r.get("vs_first") or {}).get("mcnemar")
            for r in record["runs"]
        ),
        "verdicts_changed": record.get("verdicts_changed") or [],
        "headlines": [_headline(r, primary) for r in _leading(variants)],
        "headlines_more": max(0, len(variants) - HEADLINES),
        "parents": {r["id"]: text for r in variants if (text := _parent(r, primary))},
        "forest": Markup(
            charts.forest(forest, xlabel, marks, "forest", noise_band(variants, scale))
        )
        if forest
        else None,
        "guardrails": _guardrail_figures(variants, level),
    }


HEADLINES = 8
"""The variants the top of the page names; a lab of many runs names those of the largest gains
(a list of 123 had been its whole first screen), every one still in the comparison section."""


def _leading(variants: list[dict]) -> list[dict]:
    """The `HEADLINES` variants of the largest gains against the reference (each delta is a
    gain, a reduction where less is better), in run order."""
    if len(variants) <= HEADLINES:
        return variants
    gain = {r["id"]: r["vs_reference"]["bootstrap"]["delta"] for r in variants}
    kept = set(sorted(gain, key=lambda run: -gain[run])[:HEADLINES])
    return [r for r in variants if r["id"] in kept]


def _headline(r: dict, primary: str) -> dict:
    """A variant at the top of the page: its verdict, its gain with the interval, and each
    guardrail that does not hold."""
    b = r["vs_reference"]["bootstrap"]
    return {
        "id": r["id"],
        "verdict": r.get("verdict"),
        "gain": f"{primary} {units.span(primary, b['delta'], b['low'], b['high'])}",
        "guards": [
            f"{g['metric']}{' on ' + g['on'] if g.get('on') else ''} {g['status']}"
            for g in r.get("guardrails") or []
            if g["status"] != "holds"
        ],
    }


def _parent(r: dict, primary: str) -> str | None:
    """The variant against its parent, where the parent is not the reference it was judged
    against: `against its parent r003-lora (method.head_init 'probe' -> 'new'): macro_f1 -3.1
    points (-6.0 to -0.4), worse on one seed; fixed 12, broken 25`."""
    vp = r.get("vs_parent")
    if not vp or vp["run"] == r.get("against"):
        return None
    changes = [c for group in (vp.get("diff") or {}).values() for c in group]
    changed = changes_text(changes)
    b, flips = vp["bootstrap"], vp.get("flips") or {}
    counts = (
        f"; fixed {flips['fixed']['count']}, broken {flips['broken']['count']}" if flips else ""
    )
    return (
        f"against its parent {vp['run']} ({changed or 'same spec'}): {primary} "
        f"{units.span(primary, b['delta'], b['low'], b['high'])}, {vp.get('verdict')}{counts}"
    )


def _guardrail_figures(variants: list[dict], level: float) -> list[dict]:
    """One forest plot per guardrail: each variant's check per class, field or overall. A rate
    in points, where right of the limit holds; a lower-is-better metric as the change of the
    metric itself (as the terminal and the model card give it), where left of the limit holds."""
    by_rail: dict[tuple, list[dict]] = {}
    for r in variants:
        for g in r.get("guardrails") or []:
            key = (g["metric"], g["scope"], g.get("max_drop", 0), g.get("on"))
            rows = by_rail.setdefault(key, [])
            scale = -1 if g["metric"] in PLAIN else 100  # a recorded reduction, turned round
            for name, check in (g.get("checks") or {}).items():
                if "not_checked" in check:  # nothing measured: no interval to draw
                    continue
                label = r["id"] if g["scope"] == "overall" else f"{r['id']} · {name}"
                row = _interval(label, check, check.get("status"), scale)
                rows.append(row | {"group": r["id"]})
    out = []
    for i, ((metric, scope, max_drop, on), rows) in enumerate(by_rail.items()):
        if not rows:
            continue
        where = f" on {on}" if on else ""
        head = f"{metric}{where} ({scope.replace('_', ' ')})"
        if metric in PLAIN:
            title = f"{head}, largest rise allowed {max_drop:g}"
            mark = [(max_drop, f"limit +{max_drop:g}" if max_drop else "limit 0")]
            xlabel = f"change of {metric}, a rise is a loss ({level:g}% interval)"
            good, bad = "left", "right"
        else:
            title = f"{head}, largest drop allowed {100 * max_drop:g} points"
            mark = [(-100 * max_drop, f"limit −{100 * max_drop:g}" if max_drop else "limit 0")]
            xlabel = f"Δ {metric}, points ({level:g}% interval)"
            good, bad = "right", "left"
        chart = charts.forest(rows, xlabel, mark, f"guard-{i}")
        rule = (
            f"holds when the whole interval is {good} of the limit, broken when it is all {bad} "
            "of it, else unresolved"
        )
        out.append({"title": title, "rule": rule, "chart": Markup(chart)})
    return out


def _interval(label: str, ci: dict, word: str | None, scale: float = 100) -> dict:
    """A forest row in points (`scale` 100; 1 for a metric that is not a rate, -1 to turn a
    reduction into the change itself); an arm's seeds as points (each seed's value against the
    reference arm's mean) and the interval over the examples alone beside the judged one."""
    low, high = sorted((scale * ci["low"], scale * ci["high"]))
    row = {
        "label": label,
        "delta": scale * ci["delta"],
        "low": low,
        "high": high,
        "word": word,
        "digits": 1 if scale == 100 else 4,
    }
    if "values_b" in ci:
        mean_a = sum(ci["values_a"]) / len(ci["values_a"])
        if len(ci["values_b"]) > 1:
            row["points"] = [scale * (v - mean_a) for v in ci["values_b"]]
        if ci.get("seeds"):
            row["example"] = tuple(
                sorted((scale * ci["example"]["low"], scale * ci["example"]["high"]))
            )
    return row


def noise_band(variants: list[dict], scale: float = 100) -> tuple[float, float, str] | None:
    """The noise floor as a band around zero, in points (`scale` 1: in the metric's own unit):
    ±1.96 × the seeds' sd × √2, how far a new seed alone moves a one-seed difference (95%);
    from the first seed-aware interval."""
    for r in variants:
        seeds = r["vs_reference"]["bootstrap"].get("seeds")
        if seeds:
            half = scale * 1.96 * seeds["seed_sd"] * 2**0.5
            return -half, half, f"seed noise ±{half:.2g} (sd {scale * seeds['seed_sd']:.2g})"
    return None
