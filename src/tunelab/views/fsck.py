"""The human view of `tunelab fsck`: what was checked, each problem with its path and fix."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape


def fsck(result: dict, console: Console) -> None:
    log, checked = result["log"], result["checked"]
    counts = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in checked.items())
    console.print(f"fsck {escape(result['lab'])}: checked {counts}")
    if log["unchained"]:
        console.print(
            f"  the log's first {log['unchained']} lines were written before the hash chain: "
            "read as they are"
        )
    for b in log["breaks"]:
        lines = ", ".join(map(str, b["forgives"] or [])) or "none"
        accepted = ", ".join(b.get("accepted") or []) or "none"
        console.print(
            f"  log line {b['line']}: a marked break ({escape(b['reason'] or '')}): log lines "
            f"forgiven {lines}; records accepted as they are {escape(accepted)}"
        )
        for record, why in (b.get("replaced") or {}).items():
            console.print(f"    [yellow]{escape(record)}[/]: {escape(why)}")
    for record in log.get("finished") or []:
        console.print(
            f"  finished {escape(record)}: its save was cut between its log line and its "
            "rename (a kill); the staged copy the line vouches for is now in place"
        )
    for p in result["problems"]:
        console.print(
            f"  [bold red]{p['check']}[/] {escape(p['path'])}: {escape(p['problem'])}; "
            f"{escape(p['fix'])}"
        )
    for item in result["not_checked"]:
        console.print(f"  [dim]not checked: {item}[/]")
    if result["passed"]:
        head = f"log head {log['head'][:12]}" if log["head"] else "no log yet"
        console.print(f"[bold green]clean[/] ({head})")
    else:
        console.print(f"[bold red]{len(result['problems'])} problem(s)[/]")
