"""Human summaries of each command's result (the `--json` output is the same data, raw)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

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
    for method, title in (("exact", "exact duplicates"), ("near", "near-duplicates")):
        counts = {
            k.removeprefix("near:"): v
            for k, v in dups["counts"].items()
            if v and k.startswith("near:") == (method == "near")
        }
        found = ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"
        console.print(f"  {title} (pairs): {found}")
    near = [p for p in dups["pairs"] if p["method"] == "near" and p.get("snippet")]
    across = [p for p in near if p["a"]["split"] != p["b"]["split"]]  # a leak is the news
    example = (across or near or [None])[0]
    if example:
        action = example.get("action", "")
        if action.startswith("removed from train"):
            action = "train copy removed"
        console.print(
            f"    e.g. {_short(example['a']['id'])} ~ {_short(example['b']['id'])} "
            f"({example['kind']}, similarity {example['similarity']}, {action}): "
            f"{escape(repr(example['snippet']))}"
        )
    if dups.get("pairs_file"):
        console.print(f"    every pair, with its similarity and action: {dups['pairs_file']}")
    console.print(f"  policy {dups['policy']}: {dups['removed']} rows removed from train")
    if report.get("presplit"):
        console.print("  the data came already split: the user's split was kept as it is")


def _short(row_id: str) -> str:
    """A row id that is a long path, shown by its last two parts (`business/214.txt`)."""
    parts = row_id.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 2 else row_id


def ablation(result: dict, console: Console) -> None:
    table = Table(
        result["key"],
        "run",
        "parent",
        result["runs"][0]["metric"],
        "train s",
        title=f"ablation of {result['key']}",
    )
    for r in result["runs"]:
        table.add_row(
            str(r["value"]), r["id"], str(r["parent"]), pct(r["score"]), f"{r['seconds']:.0f}"
        )
    console.print(table)
    console.print("compare them with the paired statistics: `tunelab compare`")


def invalidated(record: dict, console: Console) -> None:
    console.print(
        f"{record['id']} is now invalid (was {record['invalidated']['previous_status']}):"
        f" {record['invalidated']['why']}"
    )


def runs(rows: list[dict], console: Console) -> None:
    table = Table("run", "kind", "status", "data", "primary metric", "created (UTC)")
    table.columns[0].no_wrap = True
    for r in rows:
        created = r["created"][:16].replace("T", " ")
        table.add_row(
            r["id"],
            r["kind"],
            r["status"],
            r["data_version"][:8],
            f"{r['metric'].replace('_', ' ')} {pct(r['value'])}",
            created,
        )
    console.print(table if rows else "no runs yet: start with `tunelab baseline`.")


def metric_line(m: dict) -> str:
    """The overall metrics of a run, e.g. `accuracy 93.9%, macro f1 93.8%`."""
    shown = [k for k, v in m.items() if isinstance(v, float)]
    return ", ".join(f"{k.replace('_', ' ')} {pct(m[k])}%" for k in shown)


def baseline(result: dict, console: Console) -> None:
    for r in result["runs"]:
        m = r["metrics"]
        console.print(f"[bold]{r['id']}[/]: {metric_line(m)} on {m['n']} validation examples")


def _changes(changes: list[dict]) -> str:
    """`training.lr 0.001 -> 5e-05`; a changed `type` (lora -> full) stands for its settings."""
    kinds = [c for c in changes if c["key"].endswith(".type")]
    shown = kinds or changes
    text = ", ".join(f"{c['key']} {c['parent']} -> {c['child']}" for c in shown)
    hidden = len(changes) - len(shown)
    return text + (f" (with {hidden} settings that come with it)" if hidden else "")


def _keys(changes: list[dict]) -> list[str]:
    """The changed keys; a changed `type` stands for the settings that come with it."""
    kinds = [c["key"] for c in changes if c["key"].endswith(".type")]
    return kinds or [c["key"] for c in changes]


def run(record: dict, console: Console) -> None:
    t, m = record["training"], record["metrics"]
    if record.get("parent"):
        diff = record.get("diff") or {}
        changed = "; ".join(f"{g}: {_changes(cs)}" for g, cs in diff.items())
        if not changed:  # a variant of a baseline trains what the baseline only evaluated
            baseline = record.get("parent_kind") == "baseline"
            changed = "the same spec, now trained" if baseline else "no change (a repeat)"
        console.print(f"parent {record['parent']}: {changed}")
        if record.get("reason"):
            console.print(f"  reason: {record['reason']}")
        for w in record.get("diff_warnings", []):
            console.print(f"  [bold yellow]warning[/] {w}")
    console.print(
        f"[bold]{record['id']}[/] {record['status']}: {t['steps']} steps, {t['tokens']:,} tokens "
        f"in {t['seconds']:.0f}s ({t['tokens_per_s']:,.0f} tok/s, peak memory "
        f"{t['peak_memory_mb']:,.0f} MiB), final loss {t['final_loss']:.4f}"
    )
    console.print(f"  validation: {metric_line(m)}")
    for stage in (t.get("mixture") or {}).get("stages", []):
        drawn = ", ".join(
            f"{name} {c['rows']} rows ({c['share']:.0%}; {c['distinct']} of {c['available']} "
            "distinct)"
            for name, c in stage["sampled"].items()
        )
        first, end = stage["steps"]
        console.print(f"  mixture stage {stage['stage']} (steps {first}-{end}): {drawn}")
    if record.get("rejected_train"):
        console.print(
            f"  {len(record['rejected_train'])} train rows could not be rendered "
            f"(first: {record['rejected_train'][0]['reason']})"
        )
    warning = (record.get("preflight") or {}).get("warning")
    if warning:
        console.print(f"  [yellow]warning[/] {escape(warning)}")


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
"""Example ids shown per flip list (all of them are in `tunelab compare --json`)."""


def _flips_line(vs: dict) -> str:
    """`fixed 3 (e03, e04, e07), broken 2 (e00, e08)`; ids beyond the first three as `…`."""

    def part(name: str) -> str:
        p = vs["flips"][name]
        shown = [_short(i) for i in p["ids"][:FLIP_IDS]]
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
            f"{g} ({'; '.join(_keys(cs))})" for g, cs in (vp.get("diff") or {}).items()
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


def inspect(result: dict, console: Console) -> None:
    console.print(
        f"[bold]{result['split']} split of data version {result['data_version']}[/]: "
        f"{result['rows']} rows, {result['model_kind']} model, "
        f"{result['template']} template"
    )
    for ex in result["examples"]:
        console.print(f"\n[bold]{ex['id']}[/] ({ex['category'] or 'no category'})")
        console.print(_token_text(ex))
        loss = sum(t["loss"] for t in ex["tokens"])
        extra = ""
        if "eos_trained" in ex:
            extra = f", end token trained: {'yes' if ex['eos_trained'] else '[red]NO[/]'}"
        cut = ex.get("text_cut") or ex.get("truncated_from")
        console.print(
            f"[dim]{len(ex['tokens'])} tokens, {loss} carry the loss{extra}"
            + (f", truncated ({cut})" if cut else "")
            + f"; expected: {ex['target']}[/]"
        )
    s = result.get("summary") or {}
    if "tokens" in s:
        t = s["tokens"]
        console.print(
            f"\nlengths in tokens: p50 {t['p50']}, p95 {t['p95']}, max {t['max']}; "
            f"inputs truncated {s['inputs_truncated']}"
            + (
                f"; targets that cannot fit {s['targets_truncated']}; rows without loss "
                f"tokens {s['rows_without_loss_tokens']}; end token {s['end_token']!r}"
                + (
                    " (= pad token: masked by position, still trained)"
                    if s["pad_is_end_token"]
                    else ""
                )
                if "targets_truncated" in s
                else ""
            )
        )
    for f in result["findings"]:
        mark = "[bold red]BLOCKING[/]" if f["blocking"] else "[yellow]warning[/]"
        console.print(
            f"{mark} {f['code']}: {f['message']} ({f['count']} rows, e.g. {f['example']})"
        )
    if not result["findings"]:
        console.print("[green]no findings[/]")


def _token_text(ex: dict) -> Text:
    """Tokens with separators visible: loss tokens green, newlines as ↵, the cut marked."""
    text = Text()
    for i, tok in enumerate(ex["tokens"]):
        if ex.get("text_cut") and i == ex.get("cut_at"):
            text.append(f"[…{ex['text_cut']} tokens cut…]", style="bold red")
        piece = tok["text"].replace("\n", "↵\n")
        style = (
            "bold green"
            if tok["loss"]
            else ("magenta" if piece.startswith("<") and piece.endswith(">") else "")
        )
        text.append(piece, style=style)
    return text
