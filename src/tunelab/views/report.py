"""The human view of `report`: where the page was written."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape


def report(result: dict, console: Console) -> None:
    console.print(
        f"wrote {escape(result['file'])} ({result['bytes']:,} bytes, "
        f"{len(result['sections'])} sections); open it in any browser, offline."
    )
    if result.get("not_logged"):
        console.print(
            f"[dim]not logged in the lab: {escape(result['not_logged'])} (a read-only lab)[/]"
        )
