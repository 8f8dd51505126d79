"""The human view of `compare`: variants beside the reference, and their verdicts."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tunelab.core.replicates import arm_means, reference_arm, several_seeds
from tunelab.tasks import units
from tunelab.views.runs import changed_keys
from tunelab.views.style import (
    GUARD_STYLE,
    PLAIN,
    delta_value,
    metric_value,
    short_id,
    verdict_text,
)

GROUP_VIEW = {
    "per_class": ("per-class F1", "f1"),
    "per_field": ("per-field exact", "exact"),
    "per_source": ("per-source bits per byte", "bits_per_byte"),
}


TABLE_METRICS = 3
"""More metrics than this (extraction's five) and the verdict table keeps the primary one, the
others a table of their own: eleven columns did not fit 120, and ids were cut to `r001-ze…`.
So does a `PLAIN` primary (pretrain's bits per byte, loss and perplexity: one measure in three
units, whose three columns cut the ablation demo's table to `perplexi…`)."""


def compare(result: dict, console: Console, metric_tables: bool = True) -> None:
    """The verdict table, then (unless `metric_tables` is False: a report that has shown every
    run's metrics already) each run's other metrics and per-group scores, then each variant's
    notes."""
    primary, metrics = result["primary_metric"], result["metrics"]
    apart = len(metrics) > TABLE_METRICS or primary in PLAIN
    others = [m for m in metrics if m != primary] if apart else []
    metrics = [primary] if others else metrics
    table = _verdict_table(result, metrics)
    if result.get("reference_note"):  # of the whole table: before it
        console.print(f"[yellow]warning[/] {escape(result['reference_note'])}")
    if result.get("rules_note"):
        console.print(f"[yellow]note[/] {escape(result['rules_note'])}")
    console.print(table)
    if others and metric_tables:
        _other_metrics(result, others, console)
    if any(r.get("arm") for r in result["runs"]):
        console.print(
            "[dim]a row 'k of n' is another seed of an arm, against the arm's first seed: only "
            "the seed differs, so it measures the noise of training; the arm is judged in its "
            "first run's row, over all its seeds[/]"
        )
    _arm_means(result, console)
    if result["groups"] and metric_tables:
        _per_group(result, console)
    for r in result["runs"]:
        if "vs_reference" in r:
            _variant_notes(r, result["primary_metric"], console, reference_arm(result))
    if result.get("multiplicity"):
        console.print(f"[yellow]note[/] {escape(result['multiplicity'])}")
    for c in result.get("verdicts_changed") or []:
        console.print(
            f"[yellow]note[/] {c['run']}: {escape(c['now'])}, where {c['comparison']} read "
            f"{escape(c['was'])}: {escape(c['why'])}"
        )
    rules = result.get("rules", {})
    if rules.get("noise"):
        console.print(f"noise records counted: {', '.join(rules['noise'])}")
    elif elsewhere := rules.get("noise_elsewhere"):
        which = ", ".join(f"{n['id']} (data version {n['data_version']})" for n in elsewhere)
        console.print(
            f"[yellow]note[/] not counted: noise record {which}, measured on other validation "
            f"examples; `tunelab noise {result['reference']} --seeds 3` measures this version's"
        )
    if result.get("left_out"):
        left = ", ".join(f"{r['run']} ({r['status']})" for r in result["left_out"])
        console.print(f"[dim]not judged, not completed: {left}[/]")


def _verdict_table(result: dict, metrics: list[str]) -> Table:
    """Each run's metrics, seeds, difference with its interval, McNemar's p where a row has
    right and wrong answers, guardrails and verdict; another seed of an arm beside its first."""
    primary = result["primary_metric"]
    # McNemar's test pairs right and wrong answers: a column only where some row has one
    mcnemar = any((r.get("vs_reference") or {}).get("mcnemar") for r in result["runs"])
    delta = "reduction" if primary in PLAIN else f"Δ {primary}"  # beside the primary's column
    table = Table(
        "run",
        *[m.replace("_", " ") for m in metrics],
        "seeds",
        f"{delta}, 95% CI",
        *(["McNemar p"] if mcnemar else []),
        "guards",
        "verdict",
        title=f"against {result['reference']} ({_effect(result)})"
        + (f", comparison {result['id']}" if result.get("id") else ""),
    )
    blank = [""] if mcnemar else []
    table.columns[0].no_wrap = True  # a run id is never cut
    for r in result["runs"]:
        values = [metric_value(m, r[m]) for m in metrics]
        seeds = str(len(r["seeds"])) if r.get("seeds") else "-" if r["kind"] == "baseline" else "1"
        if r.get("arm"):  # another seed of an arm, beside the arm's first
            vf = r["vs_first"]
            position = [s["run"] for s in r["seeds"]].index(r["id"]) + 1
            table.add_row(
                r["id"],
                *values,
                f"{position} of {len(r['seeds'])}",
                delta_value(primary, vf["bootstrap"], named=False),
                *blank,
                "",
                verdict_text(vf["verdict"]),
            )
            continue
        vs = r.get("vs_reference")
        if vs is None:
            role = "reference" if r["id"] == result["reference"] else r["kind"]
            table.add_row(r["id"], *values, seeds, role, *blank, "", "")
            continue
        b = vs["bootstrap"]
        test = vs.get("mcnemar")
        # a test of the arms' first seeds, beside an interval over all of them: said so
        first = " (1st seeds)" if several_seeds(vs) else ""
        table.add_row(
            r["id"],
            *values,
            seeds,
            delta_value(primary, b, named=False),
            *([units.p_value(test["p_value"]) + first if test else "-"] if mcnemar else []),
            _guards_cell(r["guardrails"]),
            verdict_text(r["verdict"]) + _below(r["verdict"], b),
        )
    return table


def _below(verdict: str | None, b: dict) -> str:
    """Beside "no evidence" whose interval is above zero: a real gain smaller than the
    hypothesis asked, which the cell had called as it calls an interval across zero."""
    return " (a gain, below min_effect)" if verdict == "no evidence" and b["low"] > 0 else ""


def _arm_means(result: dict, console: Console) -> None:
    """What a reference and the variant arms of several seeds are judged on: their means."""
    primary = result["primary_metric"]
    arm = reference_arm(result)
    if arm:
        n, mean = arm
        console.print(
            f"[dim]{result['reference']} over its {n} seeds: {primary.replace('_', ' ')} "
            f"{metric_value(primary, mean)} on average, the value each variant's interval is "
            f"against; its row gives its first seed's own, and each variant's "
            f"{'better and worse' if primary in PLAIN else 'fixed and broken'} examples are "
            "counted against that first seed[/]"
        )
    means = arm_means(result)
    if means:
        listed = "; ".join(f"{i} {metric_value(primary, m)} over {n} seeds" for i, n, m in means)
        console.print(
            f"[dim]{primary.replace('_', ' ')} of each variant arm on average, the value its "
            f"difference is from: {listed} (its row gives its first seed's own)[/]"
        )


FLIP_IDS = 3


def _flips_line(vs: dict) -> str:
    """`fixed 3 (e03, e04, e07), broken 2 (e00, e08)`; ids beyond the first three as `…`. A
    document's bits per byte is not fixed or broken: `better 41 (...), worse 4 (...)`."""
    scored = vs.get("metric") in PLAIN  # a per-document score, not a right or wrong answer

    def part(name: str, word: str) -> str:
        p = vs["flips"][name]
        shown = [short_id(i) for i in p["ids"][:FLIP_IDS]]
        ids = ", ".join(shown) + (", …" if p["count"] > len(shown) else "")
        return f"{word if scored else name} {p['count']}" + (f" ({ids})" if ids else "")

    return f"{part('fixed', 'better')}, {part('broken', 'worse')}"


def _other_metrics(result: dict, metrics: list[str], console: Console) -> None:
    """The metrics beside the primary one, one value per run and metric."""
    names = {m.replace("_", " "): m for m in metrics}
    _grid(
        "other metrics",
        result["runs"],
        list(names),
        lambda r, n: metric_value(names[n], r[names[n]]),
        console,
    )


def _guards_cell(guardrails: list[dict]) -> str:
    """`2 hold` or `1 hold, 1 unresolved`, in the colour of the worst."""
    counts: dict[str, int] = {}
    for g in guardrails:
        counts[g["status"]] = counts.get(g["status"], 0) + 1
    if not counts:
        return "-"
    worst = next(s for s in ("broken", "unresolved", "holds") if s in counts)
    text = ", ".join(f"{n} {s if s != 'holds' else 'hold'}" for s, n in counts.items())
    return f"[{GUARD_STYLE[worst]}]{text}[/]"


def _effect(result: dict) -> str:
    """`minimum effect +10.0 points` (a reduction's as it is), or no hypothesis to judge by."""
    if result.get("min_effect") is None:
        return "no hypothesis recorded"
    return units.effect(result["primary_metric"], result["min_effect"])


def guardrail_line(g: dict) -> str:
    """One guardrail's interval at its worst scope: `f1 every_class holds: most at risk business
    -1.2 (-3.9, +1.4) points, limit -5.0`."""
    c = g["checks"][g["worst"]]
    name = g["metric"] + (f" on {g['on']}" if g.get("on") else "")  # a forgetting guardrail
    status = f"[{GUARD_STYLE[g['status']]}]{g['status']}[/]"
    if "not_checked" in c:
        return f"{name} {g['scope']} {status}: not checked ({c['not_checked']})"
    # the group whose interval reaches lowest: the one the guardrail is judged by
    where = "" if g["scope"] == "overall" else f" most at risk {short_id(g['worst'])}"
    if g["metric"] in PLAIN:  # lower is better: shown as the change of the metric itself
        interval = (
            f"change {-c['delta']:+.4f} ({-c['high']:+.4f}, {-c['low']:+.4f}), "
            f"limit +{g['max_drop']:.4f}"
        )
    else:
        limit = f"-{100 * g['max_drop']:.1f}" if g["max_drop"] else "0 (no drop)"
        interval = f"{delta_value(g['metric'], c)} points, limit {limit}"
    text = f"{name} {g['scope']} {status}:{where} " + interval
    if c.get("needed_n"):
        text += f"; ~{c['needed_n']:,} validation examples{_times_these(c)} would resolve it"
    elif c.get("needs"):
        text += f"; {c['needs']} would resolve it"
    return text


def _times_these(c: dict) -> str:
    """` (6,124x these 91)` where the examples a guardrail needs are far past those it had: a
    change that sits on the limit itself."""
    n = c.get("examples")
    return f" ({c['needed_n'] / n:,.0f}x these {n:,})" if n and c["needed_n"] > 10 * n else ""


def noise_line(b: dict, metric: str, against: str = "") -> str:
    """Which noise the judged interval counts: `over the examples alone +2.1 (+0.4, +3.8);
    with the seeds' noise (sd 1.2, 2 degrees of freedom, from r002 (3 seeds)) -1.9 (...)`;
    `against` says from what, where it is a reference's mean over its seeds."""
    ex = {**b["example"], "delta": b["delta"]}
    text = f"over the examples alone{against} {delta_value(metric, ex)}"
    seeds = b.get("seeds")
    if not seeds:
        return text + "; seed noise not counted (one seed per arm, no noise record)"
    scale = 1 if metric in PLAIN else 100
    return (
        text + f"; with the seeds' noise (sd {scale * seeds['seed_sd']:.4g}, {seeds['seed_df']} "
        f"degrees of freedom, from {', '.join(seeds['sources'])}) {delta_value(metric, b)}"
    )


def _variant_notes(r: dict, primary: str, console: Console, arm: tuple | None = None) -> None:
    """Under the table, per variant: why it was made, flips, guardrails with their intervals,
    the parent view, warnings. Against a reference of several seeds (`arm`), the flips are
    counted against its first seed and the difference is from its mean: each line says so."""
    console.print(f"[bold]{r['id']}[/]" + (f" — reason: {r['reason']}" if r.get("reason") else ""))
    ref = r.get("against", "reference")
    first, mean = (
        (f"{ref}'s first seed", f" (from {ref}'s mean over {arm[0]} seeds)") if arm else (ref, "")
    )
    if r.get("repeat_of"):  # the JSON said so; the terminal and report had not
        console.print(
            f"  a repeat of {r['repeat_of']} (the same spec and seed): not a seed of its arm, "
            "judged alone; what it differs by is the arithmetic's order, not a change"
        )
    console.print(f"  vs {first}: {_flips_line(r['vs_reference'])}")
    console.print(f"  {noise_line(r['vs_reference']['bootstrap'], primary, mean)}")
    if r.get("data_note"):
        console.print(f"  {r['data_note']}")
    for g in r["guardrails"]:
        console.print(f"  guardrail {guardrail_line(g)}")
    # shown above: the primary's interval (the minimum effect in the table's title) and the
    # guardrails; a concentrated gain is among the warnings
    shown = (f"{primary} ", "over the examples", *(f"{g['metric']} (" for g in r["guardrails"]))
    if r.get("verdict") != "improved":
        for reason in r.get("reasons", []):
            if reason not in r.get("warnings", []) and not reason.startswith(shown):
                console.print(f"  {reason}")
    vp = r.get("vs_parent")
    if vp:
        diff = (vp.get("diff") or {}).values()  # a base moved, its bytes the same: no change
        keys = [k for cs in diff for k in changed_keys([c for c in cs if not c.get("same_base")])]
        head = f"  parent {vp['run']} ({'changed: ' + ', '.join(keys) if keys else 'same spec'})"
        if vp["run"] == r.get("against"):
            console.print(head + ": the reference above")
        else:
            b = vp["bootstrap"]
            console.print(
                f"{head}: Δ {primary} {delta_value(primary, b)}, "
                f"{verdict_text(vp['verdict'])}; {_flips_line(vp)}"
            )
            for w in vp.get("warnings", []):
                if w not in r.get("warnings", []):  # a run's own note is said once, below
                    console.print(f"    [yellow]warning[/] (vs parent) {w}")
    for w in r.get("warnings", []):
        console.print(f"  [yellow]warning[/] {w}")


def _per_group(result: dict, console: Console) -> None:
    key = result["groups"]
    title, metric = GROUP_VIEW[key]
    names = list(result["runs"][0][key])

    def value(run: dict, name: str) -> str:
        scores = run[key][name]
        if scores.get("support") == 0:  # no example of it here: its F1 of 0 measures nothing
            return "[dim]no example[/]"
        return metric_value(metric, scores[metric])

    _grid(title, result["runs"], names, value, console)


def _grid(title: str, runs: list[dict], names: list[str], value, console: Console) -> None:
    """`value(run, name)` for every run and name, the longer of the two lists down the rows:
    a column per run cut eight runs' ids to `r001-zer…` in 120 characters; a column per class
    would do the same to twenty classes."""
    if len(runs) > len(names):
        table = Table(title, *names, box=None, padding=(0, 2))
        table.columns[0].no_wrap = True  # a run id is never cut
        for r in runs:
            table.add_row(r["id"], *[value(r, n) for n in names])
    else:
        table = Table(title, *[r["id"] for r in runs], box=None, padding=(0, 2))
        for n in names:
            table.add_row(n, *[value(r, n) for r in runs])
    console.print(table)
