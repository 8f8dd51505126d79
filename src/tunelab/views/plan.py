"""The human view of `plan`: the rental's phases, what each is based on, variants and cost."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tunelab.core.durations import seconds


def plan(result: dict, console: Console) -> None:
    """The phases as a timeline, where to stop the experiments, the cost, the warnings, and
    the record and field behind every figure."""
    t = result["throughput"]
    console.print(
        f"[bold]plan {result['id']}[/]: {result['days']} days ({result['hours_total']:g} h) on "
        f"{escape(result['device'])}, measured on {result['measured_on']}; "
        f"{t['tokens_per_s']:,.1f} {t.get('unit', 'tokens')}/s ({escape(t['source'])})"
    )
    if result.get("overrides"):  # a what-if, not the spec as it stands
        given = ", ".join(f"{k}={v}" for k, v in result["overrides"].items())
        console.print(f"  a what-if, with {escape(given)}")
    table = Table("phase", "hours", "from → to", "what", box=None, padding=(0, 1))
    table.columns[0].no_wrap = True
    table.columns[1].justify = "right"
    for p in result["phases"]:
        table.add_row(
            p["name"],
            f"{p['hours']:g}",
            f"{p['start_hour']:g} → {p['end_hour']:g}",
            escape(p["what"]),
        )
    table.add_row("[bold]total[/]", f"[bold]{result['hours_total']:g}[/]", "", "")
    console.print(table)
    v = result["variants"]
    mark = "bold" if v["fit"] else "bold red"
    console.print(
        f"variants: [{mark}]{v['fit']:,}[/] fit, {v['hours_each']:g} h "
        f"({seconds(v['seconds_each'], hours=False)}) each, {v['steps_each']} steps "
        f"({escape(v['steps_source'])})"
    )
    console.print(f"stop: {escape(v['stop_after'])}")
    console.print(_cost(result))
    based = Table("based on", "", box=None, padding=(0, 1), style="dim", header_style="dim")
    based.columns[0].no_wrap = True
    for p in result["phases"]:
        based.add_row(p["name"], escape(p["based_on"]), style="dim")
    console.print(based)
    for warning in result["warnings"]:
        console.print(f"[yellow]warning[/] {escape(warning)}")
    console.print(f"[dim]saved to {result['file']}[/]")


def summary(result: dict, console: Console) -> None:
    """The plan in a few lines, for a report that has more to say (the demos): its phases on
    one line, how many variants fit, its warnings, and where the whole plan is."""
    t, v = result["throughput"], result["variants"]
    console.print(
        f"[bold]plan {result['id']}[/]: a {result['days']}-day rental on "
        f"{escape(result['device'])} at {result['based_on']['run']['id']}'s measured "
        f"{t['tokens_per_s']:,.0f} {t.get('unit', 'tokens')}/s, so one variant of "
        f"{v['steps_each']} steps takes {seconds(v['seconds_each'], hours=False)}{_split(v)}"
    )
    phases = " · ".join(f"{p['name']} {p['hours']:g} h" for p in result["phases"])
    console.print(f"  {phases}")
    stop = escape(v["stop_after"]) if v["fit"] else f"[bold red]{escape(v['stop_after'])}[/]"
    console.print(f"  stop: {stop}")
    if result["cost"] is not None:
        console.print(f"  {_cost(result)}")
    for warning in result["warnings"]:
        console.print(f"  [yellow]warning[/] {escape(warning)}")
    console.print(
        f"  [dim]every figure with the record it stands on: {result['file']} (and the lab "
        "report)[/]"
    )


def _split(v: dict) -> str:
    """` (124 s training, 41 s evaluating and saving)`; nothing for a plan recorded before
    the split was."""
    rest = v.get("overhead_each")
    if rest is None:
        return ""
    training = seconds(v["seconds_each"] - rest, hours=False)
    return f" ({training} training, {seconds(rest, hours=False)} evaluating and saving)"


def _cost(result: dict) -> str:
    if result["cost"] is None:
        return "cost: no price given (--price-per-hour, or rental.price_per_hour in the spec)"
    return (
        f"cost: {result['hours_total']:g} h × {result['price_per_hour']:g} per hour = "
        f"[bold]{result['cost']:,.2f}[/]"
    )
