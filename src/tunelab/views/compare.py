"""The human views of `compare` and `final`: variants beside the reference, verdicts, the test."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from tunelab.views.runs import changed_keys, metric_line
from tunelab.views.style import VERDICT_STYLE, pct, short_id

GROUP_VIEW = {"per_class": ("per-class F1", "f1"), "per_field": ("per-field exact", "exact")}


def compare(result: dict, console: Console) -> None:
    primary, metrics = result["primary_metric"], result["metrics"]
    table = Table(
        "run",
        *[m.replace("_", " ") for m in metrics],
        f"Δ {primary} (95% CI)",
        "McNemar p",
        "guards",
        "verdict",
        title=f"against {result['reference']} (minimum effect {result['min_effect']})",
    )
    for r in result["runs"]:
        values = [pct(r[m]) for m in metrics]
        vs = r.get("vs_reference")
        if vs is None:
            role = "reference" if r["id"] == result["reference"] else r["kind"]
            table.add_row(r["id"], *values, role, "", "", "")
            continue
        b = vs["bootstrap"]
        mcnemar = vs.get("mcnemar")
        passed = sum(g["passed"] for g in r["guardrails"])
        style = VERDICT_STYLE[r["verdict"]]
        table.add_row(
            r["id"],
            *values,
            f"{100 * b['delta']:+.1f} ({100 * b['low']:+.1f}, {100 * b['high']:+.1f})",
            f"{mcnemar['p_value']:.3f}" if mcnemar else "-",
            f"{passed}/{len(r['guardrails'])}",
            f"[{style}]{r['verdict']}[/]",
        )
    console.print(table)
    if result["groups"]:
        _per_group(result, console)
    for r in result["runs"]:
        if "vs_reference" in r:
            _variant_notes(r, result["primary_metric"], console)


FLIP_IDS = 3


def _flips_line(vs: dict) -> str:
    """`fixed 3 (e03, e04, e07), broken 2 (e00, e08)`; ids beyond the first three as `…`."""

    def part(name: str) -> str:
        p = vs["flips"][name]
        shown = [short_id(i) for i in p["ids"][:FLIP_IDS]]
        ids = ", ".join(shown) + (", …" if p["count"] > len(shown) else "")
        return f"{name} {p['count']}" + (f" ({ids})" if ids else "")

    return f"{part('fixed')}, {part('broken')}"


def _variant_notes(r: dict, primary: str, console: Console) -> None:
    """Under the table, per variant: why it was made, flips, the parent view, warnings."""
    console.print(f"[bold]{r['id']}[/]" + (f" — reason: {r['reason']}" if r.get("reason") else ""))
    console.print(f"  vs {r.get('against', 'reference')}: {_flips_line(r['vs_reference'])}")
    if r.get("verdict") != "improved":
        for reason in r.get("reasons", []):
            if "handful" not in reason:  # shown once, among the warnings
                console.print(f"  {reason}")
    vp = r.get("vs_parent")
    if vp:
        changed = ", ".join(
            f"{g} ({'; '.join(changed_keys(cs))})" for g, cs in (vp.get("diff") or {}).items()
        )
        head = f"  parent {vp['run']} ({changed or 'same spec'})"
        if vp["run"] == r.get("against"):
            console.print(head + ": the reference above")
        else:
            b, style = vp["bootstrap"], VERDICT_STYLE[vp["verdict"]]
            console.print(
                f"{head}: Δ {primary} {100 * b['delta']:+.1f} "
                f"({100 * b['low']:+.1f}, {100 * b['high']:+.1f}), "
                f"[{style}]{vp['verdict']}[/]; {_flips_line(vp)}"
            )
            for w in vp.get("warnings", []):
                console.print(f"    [yellow]warning[/] (vs parent) {w}")
    for w in r.get("warnings", []):
        console.print(f"  [yellow]warning[/] {w}")


def final(result: dict, console: Console) -> None:
    """The one look at the test split: its metrics beside validation, and the access."""
    m, primary = result["metrics"], result.get("primary_metric")
    console.print(
        f"[bold]final {result['run']}[/] on the sealed test split of {result['data_version']}"
        f" ({m['n']} examples, sha256 {result['test_sha256'][:12]}… verified)"
    )
    console.print(f"  test: {metric_line(m)}")
    val = result.get("validation_metrics") or {}
    if primary and primary in val and primary in m:
        gap = m[primary] - val[primary]
        console.print(
            f"  {primary.replace('_', ' ')}: validation {pct(val[primary])}% -> test "
            f"{pct(m[primary])}% ({100 * gap:+.1f} points)"
        )
    access = f"access {result['n']} recorded in {result['file']}"
    if result["repeated"]:
        earlier = ", ".join(f"{e['run']} ({e['time']})" for e in result["earlier"])
        console.print(
            f"  [yellow]repeated[/] {access}; earlier: {earlier}; reason: {result['reason']}"
        )
    else:
        console.print(f"  {access}; any later look needs --reason and is listed in the handover")


def _per_group(result: dict, console: Console) -> None:
    key = result["groups"]
    title, metric = GROUP_VIEW[key]
    table = Table(title, *[r["id"] for r in result["runs"]], box=None, padding=(0, 2))
    for name in result["runs"][0][key]:
        table.add_row(name, *[pct(r[key][name][metric]) for r in result["runs"]])
    console.print(table)
