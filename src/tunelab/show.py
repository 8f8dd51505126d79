"""Human summaries of each command's result (the `--json` output is the same data, raw)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

VERDICT_STYLE = {"improved": "bold green", "no evidence": "yellow", "guardrail broken": "bold red"}


def console(stderr: bool = False) -> Console:
    """A console at the terminal's width, or 120 columns when the output is piped."""
    out = Console(stderr=stderr)
    return out if out.is_terminal else Console(stderr=stderr, width=120)


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def init(result: dict, console: Console) -> None:
    console.print(f"wrote {result['spec']} ({result['task']}); edit it, then run `tunelab data`.")


def data(report: dict, console: Console) -> None:
    state = "new version" if report["new"] else "unchanged, version reused"
    console.print(f"[bold]data version {report['version']}[/] ({state})")
    q = report["quarantine"]
    console.print(
        f"  rows read {report['rows_read']:,} = kept {report['kept']:,} + quarantined "
        f"{report['quarantined']:,} + removed as duplicates {report['duplicates_removed']:,}"
    )
    if report["quarantined"]:
        reasons = ", ".join(f"{k} {v}" for k, v in q["reasons"].items())
        console.print(f"  quarantine: {reasons} -> {q['file']}")
    if report["cleaning"]:
        rules = ", ".join(f"{k} changed {v}" for k, v in report["cleaning"].items())
        console.print(f"  cleaning: {rules}")
    table = Table("split", "rows", *report["labels"], title=None, box=None, padding=(0, 2))
    for split, info in report["splits"].items():
        counts = [str(info["labels"].get(label, 0)) for label in report["labels"]]
        table.add_row(split, str(info["n"]), *counts)
    console.print(table)
    dups = report["duplicates"]
    found = ", ".join(f"{k} {v}" for k, v in dups["counts"].items() if v) or "none"
    console.print(
        f"  exact duplicates (pairs): {found}; policy {dups['policy']}, "
        f"{dups['removed']} removed from train"
    )
    if report.get("presplit"):
        console.print("  the data came already split: the user's split was kept as it is")


def runs(rows: list[dict], console: Console) -> None:
    table = Table("run", "kind", "status", "data", "accuracy", "macro-F1", "created (UTC)")
    table.columns[0].no_wrap = True
    for r in rows:
        created = r["created"][:16].replace("T", " ")
        table.add_row(
            r["id"],
            r["kind"],
            r["status"],
            r["data_version"][:8],
            pct(r["accuracy"]),
            pct(r["macro_f1"]),
            created,
        )
    console.print(table if rows else "no runs yet: start with `tunelab baseline`.")


def baseline(result: dict, console: Console) -> None:
    for r in result["runs"]:
        m = r["metrics"]
        console.print(
            f"[bold]{r['id']}[/]: accuracy {pct(m['accuracy'])}%, macro-F1 "
            f"{pct(m['macro_f1'])}% on {m['n']} validation examples"
        )


def run(record: dict, console: Console) -> None:
    t, m = record["training"], record["metrics"]
    console.print(
        f"[bold]{record['id']}[/] {record['status']}: {t['steps']} steps, {t['tokens']:,} tokens "
        f"in {t['seconds']:.0f}s ({t['tokens_per_s']:,.0f} tok/s, peak memory "
        f"{t['peak_memory_mb']:,.0f} MiB), final loss {t['final_loss']:.4f}"
    )
    console.print(f"  validation: accuracy {pct(m['accuracy'])}%, macro-F1 {pct(m['macro_f1'])}%")


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
        for reason in r.get("reasons", []) if r.get("verdict") != "improved" else []:
            console.print(f"  {r['id']}: {reason}")


def _per_group(result: dict, console: Console) -> None:
    key = result["groups"]
    title, metric = GROUP_VIEW[key]
    table = Table(title, *[r["id"] for r in result["runs"]], box=None, padding=(0, 2))
    for name in result["runs"][0][key]:
        table.add_row(name, *[pct(r[key][name][metric]) for r in result["runs"]])
    console.print(table)
