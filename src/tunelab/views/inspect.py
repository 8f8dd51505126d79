"""The human view of `inspect`: examples as the trainer sees them, token by token."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text


def inspect(result: dict, console: Console) -> None:
    if result.get("kind") == "images":
        _images(result, console)
        _findings(result["findings"], console)
        return
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
        cut = (
            f", {ex['text_cut']} tokens of the text cut"
            if ex.get("text_cut")
            else f", cut from {ex['truncated_from']} tokens"
            if ex.get("truncated_from")
            else ""
        )
        if ex.get("turns"):
            console.print(_turns_line(ex))
            cut = ""  # said with the turns
        # a classifier's loss is its head's, on the label: no token carries it
        carry = (
            f"loss: {ex['loss']}" if isinstance(ex.get("loss"), str) else f"{loss} carry the loss"
        )
        expected = ex["target"] if isinstance(ex["target"], str) else str(ex["target"])
        expected = escape(expected.replace("\n", "↵"))  # one line, as the text above shows it
        console.print(
            f"[dim]{len(ex['tokens'])} tokens, {carry}{extra}{cut}; expected: {expected}[/]"
        )
    s = result.get("summary") or {}
    shown = s.get("shown")
    if shown and shown["examples"] == 0:  # `--sample 0`: the findings alone
        console.print("\n[dim]no examples shown (`--sample 0`): the summary and findings only[/]")
    elif shown and shown["of_categories"] < shown["categories"]:
        console.print(
            f"\n[dim]{shown['examples']} examples of the first {shown['of_categories']} of "
            f"{shown['categories']} categories shown (`--sample 1` shows one of each)[/]"
        )
    if "tokens" in s:
        t = s["tokens"]
        console.print(
            f"\nlengths in tokens: p50 {t['p50']}, p95 {t['p95']}, max {t['max']}; "
            + ("conversations cut" if "turns" in s else "inputs truncated")
            + f" {s['inputs_truncated']}"
            + (
                f"; targets that cannot fit {s['targets_truncated']}"
                + (
                    f"; rows the template cannot render {s['rows_not_rendered']}"
                    if s.get("rows_not_rendered")
                    else ""
                )
                + f"; rows without loss "
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
    _findings(result["findings"], console)


def _turns_line(ex: dict) -> str:
    """`turns: system 14 · user 12 · assistant 9 (8 trained) · ...`, and what was dropped."""
    parts = [
        f"{t['role']} {t['tokens']}"
        + (f" ({n} trained)" if (n := t["loss_tokens"]) else "")
        + (" (weight 0)" if t.get("weight") == 0 else "")
        for t in ex["turns"]
    ]
    line = "[dim]turns: " + " · ".join(parts)
    if ex.get("turns_cut"):
        line += (
            f"; {ex['turns_cut']} turns ({ex['text_cut']} tokens) dropped to fit: "
            f"{ex['truncation_rule']}"
        )
    return line + "[/]"


def _findings(findings: list[dict], console: Console) -> None:
    for f in findings:
        mark = "[bold red]BLOCKING[/]" if f["blocking"] else "[yellow]warning[/]"
        example = f", e.g. {f['example']}" if f.get("example") is not None else ""
        listed = len(f.get("rows", ()))
        every = (
            ""
            if listed < 2
            else ", every one in --json"
            if listed == f["count"]
            else f", the first {listed:,} in --json"
        )
        console.print(f"{mark} {f['code']}: {f['message']} ({f['count']} rows{example}{every})")
    if not findings:
        console.print("[green]no findings[/]")


def _images(result: dict, console: Console) -> None:
    """Per category: how many, their sizes and aspect ratios, modes, and the contact sheet."""
    console.print(
        f"[bold]{result['split']} split of data version {result['data_version']}[/]: "
        f"{result['rows']} images"
    )
    table = Table("category", "images", "width p5/p50/p95", "height p5/p50/p95", "aspect p50")
    table.add_column("modes")
    for label, c in result["summary"]["categories"].items():
        w, h = c["width"], c["height"]
        modes = ", ".join(f"{m} {n}" for m, n in c["modes"].items())
        table.add_row(
            label,
            str(c["count"]),
            f"{w['p5']}/{w['p50']}/{w['p95']}",
            f"{h['p5']}/{h['p50']}/{h['p95']}",
            f"{c['aspect']['p50']:.2f}",
            modes,
        )
    console.print(table)
    for label, c in result["summary"]["categories"].items():
        console.print(f"[dim]contact sheet of {label}: {c['contact_sheet']}[/]")
        v = c.get("model_view")
        if v:
            kept = v["kept_area"]
            area = f", area kept p50 {kept['p50']:.0%} (min {kept['min']:.0%})" if kept else ""
            console.print(
                f"[dim]  as the model receives it: {'x'.join(map(str, v['shape']))}, values "
                f"{v['range'][0]:+.2f}..{v['range'][1]:+.2f}{area}: {v['contact_sheet']}[/]"
            )
    if result["summary"].get("model_view"):
        console.print(f"[dim]model view {result['summary']['model_view']}[/]")


def _token_text(ex: dict) -> Text:
    """Tokens with separators visible: loss tokens green, newlines as ↵, the cut marked."""
    text = Text()
    for i, tok in enumerate(ex["tokens"]):
        if ex.get("text_cut") and i == ex.get("cut_at"):
            what = f"{ex['turns_cut']} turns, " if ex.get("turns_cut") else ""
            text.append(f"[…{what}{ex['text_cut']} tokens cut…]", style="bold red")
        piece = tok["text"].replace("\n", "↵\n")
        style = (
            "bold green"
            if tok["loss"]
            else ("magenta" if piece.startswith("<") and piece.endswith(">") else "")
        )
        text.append(piece, style=style)
    return text
