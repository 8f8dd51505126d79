"""The human view of `check`: the preflight checklist."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def check(result: dict, console: Console) -> None:
    """The preflight checklist: one line per item with its step's seconds (on the step's first
    item only: the items of one step share them), then the verdict."""
    table = Table("", "check", "detail", "", box=None, padding=(0, 1))
    table.columns[1].no_wrap = True
    table.columns[3].justify = "right"
    table.columns[3].no_wrap = True
    for i in result["items"]:
        mark = mark_of(i)
        first = i.get("step") == i["name"] and "seconds" in i
        seconds = f"[dim]{i['seconds']:.1f}s[/]" if first else ""
        table.add_row(mark, i["name"], escape(i["detail"]), seconds)
    console.print(table)
    for warning in result["warnings"]:
        console.print(f"[yellow]warning[/] {escape(warning)}")
    verdict = "[bold green]PASSED[/]"
    if not result["passed"]:
        skipped = f"; {len(result['skipped'])} not run" if result["skipped"] else ""
        verdict = f"[bold red]FAILED[/] ({', '.join(result['failed'])}{skipped})"
    rows = result["slice"]
    console.print(
        f"check {verdict} on {rows['train']} train and {rows['validation']} validation rows of "
        f"data version {result['data_version'][:8]} in {result['seconds']:.0f}s; "
        f"saved to {result['file']}"
    )


def mark_of(i: dict) -> str:
    """✓ passed, ✗ failed, ? not checked (a warning, never a pass), - not run."""
    if i.get("skipped"):
        return "[dim]-[/]"
    if i.get("not_checked"):
        return "[yellow]?[/]"
    return "[green]✓[/]" if i["passed"] else "[red]✗[/]"
