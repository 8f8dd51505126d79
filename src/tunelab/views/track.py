"""The human view of `track`: where the lab went in MLflow, and what each run got there."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tunelab.views.style import verdict_text


def track(result: dict, console: Console) -> None:
    """One line for the store and experiment, a row per run (what was added, or nothing), the
    counts, and how to open the store in MLflow's UI."""
    exp = result["experiment"]
    made = ", new" if exp["new"] else ""
    console.print(
        f"[bold]track[/] {escape(result['lab'])} -> MLflow experiment "
        f"{escape(exp['name'])!r} (id {exp['id']}{made})"
    )
    console.print(f"  store {escape(result['uri'])} ({result['uri_from']})")
    table = Table("run", "state", "verdict", "MLflow run", "added", box=None, padding=(0, 1))
    table.columns[0].no_wrap = True
    for r in result["runs"]:
        verdict = verdict_text(r["verdict"]) if r["verdict"] else "[dim]-[/]"
        table.add_row(r["id"], r["state"], verdict, r["mlflow_run"][:12], _added(r))
    lab = result["lab_run"]
    if lab:
        held = f" [dim](holds {', '.join(lab['artifacts_held'])})[/]" if not lab["changed"] else ""
        table.add_row("lab", "", "", lab["mlflow_run"][:12], _added(lab) + held)
    console.print(table if result["runs"] or lab else "no runs yet: nothing to track.")
    for r in [*result["runs"], *([lab] if lab else [])]:
        if r["conflicts"]:
            console.print(
                f"[yellow]{r.get('id', 'lab')}[/]: MLflow holds other values for "
                f"{', '.join(r['conflicts'][:5])}; params never change in MLflow, left as they are"
            )
    if lab and lab.get("stale_report"):
        console.print(
            f"[yellow]report page[/]: {escape(lab['stale_report'])}; `tunelab report`, then "
            "`tunelab track` again, uploads the lab as it stands"
        )
    c, a = result["counts"], result["added"]
    line = f"{c['new']} new, {c['updated']} updated, {c['unchanged']} unchanged"
    line += f", {c['skipped']} deleted in MLflow (left so)" if c["skipped"] else ""
    if c.get("doubted"):
        line += f", {c['doubted']} not tracked (records the lab's log does not vouch for)"
    if any(a.values()):
        kinds = ("params", "param"), ("metrics", "metric point"), ("tags", "tag")
        added = [_count(a[k], word) for k, word in (*kinds, ("artifacts", "artifact"))]
        line += f": {', '.join(added)} added"
    else:
        line += ": nothing added"
    console.print(line)
    if result["ui"]:
        console.print(f"[dim]to look: {escape(result['ui'])} (needs the full mlflow package)[/]")


def _added(row: dict) -> str:
    if row["skipped"]:
        return f"[yellow]{escape(row['skipped'])}[/]"
    if not row["changed"]:
        return "[dim]nothing[/]"
    kinds = ("params", "param"), ("metrics", "point"), ("tags", "tag")
    parts = [_count(row[kind], word) for kind, word in kinds if row[kind]]
    if row["artifacts"]:
        parts.append(", ".join(row["artifacts"]))
    if row["status"] and not row["new"]:
        parts.append(f"status {row['status']}")
    return ("new: " if row["new"] else "") + ", ".join(parts)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
