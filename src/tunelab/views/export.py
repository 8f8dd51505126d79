"""The human views of `export` and `verify`: what the bundle holds, and its checklist."""

from __future__ import annotations

import shlex

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tunelab.views.check import mark_of


def regressions(regressed: list[dict], shown: int = 3) -> str:
    """What the guardrails measured worse than the reference, named, worst first (the model card
    gives each one's interval): `worse than the reference in the point estimate (...): f1 of sport
    (holds), …` (bits per byte
    that rose, an F1 that fell). A point estimate worse than it, whose interval may still hold:
    the status says which."""
    if not regressed:
        return "no guardrail measured a regression"
    names = []
    for r in regressed[:shown]:
        if r.get("on"):
            where = f"on {r['on']}"
        else:
            where = "overall" if r["scope"] == "overall" else f"of {r['scope']}"
        names.append(f"{r['metric']} {where} ({r['status']})")
    more = f" and {len(regressed) - shown} more" if len(regressed) > shown else ""
    return (
        f"worse than the reference in the point estimate (each guardrail's status in brackets): "
        f"{escape(', '.join(names))}{more}; their intervals in the model card"
    )


def _cut(cut: dict) -> str:
    """`; 445 of 445 validation inputs cut to 128 tokens (model.max_length)`."""
    if not cut["truncated"]:
        return f"; no validation input cut (model.max_length {cut['max_length']})"
    return (
        f"; {cut['truncated']} of {cut['n']} validation inputs cut to {cut['max_length']} tokens "
        "(model.max_length)"
    )


def export(result: dict, console: Console) -> None:
    base = result["base_model"]
    console.print(f"[bold]bundle of {result['run']}[/]: {result['bundle']}")
    whole = f" (its sha256 {result['sums_sha256'][:16]}…)" if result.get("sums_sha256") else ""
    console.print(
        f"  {len(result['files'])} files, listed with their sha256 in SHA256SUMS{whole}; bound "
        f"to {base['name']} ({'weights' if base.get('path') else 'config and tokenizer'} "
        f"sha256 {base['weights_sha256'][:16]}…)"
    )
    lim, cut = result["limitations"], result["limitations"]["truncation"]
    console.print(
        f"  verdict {lim['verdict'] or 'none'} ({lim['source']}); "
        + (regressions(lim["regressed"]) if lim["verdict"] else "no guardrail was measured")
        + (_cut(cut) if cut else "")
    )
    m = result.get("merge_check")
    if m:
        mark = "[green]agree[/]" if m["agree"] else "[red]DIFFER[/]"
        console.print(
            f"  merged/: merged and adapter outputs {mark} on {m['examples']} examples "
            f"(max |Δ logit| {m['max_abs_logit_diff']:.1e}, tolerance {m['tolerance']:.1e})"
        )
    served = result.get("serving") or {}
    if served.get("plain_lora") is False:
        console.print(
            "  [yellow]not a plain LoRA[/]: engines that load only LoRA matrices (vLLM) refuse "
            f"it ({escape('; '.join(w.split(':')[0] for w in served['why']))}); serve "
            f"{escape(served['servable'])}"
        )
    elif served.get("plain_lora"):
        console.print(
            "  a plain LoRA: an engine that serves LoRA adapters for this architecture can load "
            "it as it is (which architectures an engine serves LoRA for is its own list)"
        )
    g = result.get("gguf")
    if g:
        t = g["tokenizer"]
        console.print(
            f"  {g['file']}: {g['architecture']}, {g['dtype']}, {g['tensors']} tensors; tokenizer "
            f"BOS {t['bos']}, EOS {t['eos']}, chat template "
            f"{'embedded' if t['chat_template'] else 'none'}, pre-tokenizer {t['pre']!r}; "
            f"llama.cpp: {escape(g['llama_cpp'])}"
        )
    removed = result.get("leftovers_removed") or []
    if removed:
        console.print(
            f"  removed {len(removed)} temporary folder(s) that killed exports left (in bundles/, "
            f"or beside this bundle): {escape(', '.join(removed))}"
        )
    console.print(f"  check it anywhere: `tunelab verify {escape(shlex.quote(result['bundle']))}`")


def verify(result: dict, console: Console) -> None:
    table = Table("", "check", "detail", box=None, padding=(0, 1))
    for i in result["items"]:
        table.add_row(mark_of(i), i["name"], escape(i["detail"]))
    console.print(table)
    verdict = "[bold green]VERIFIED[/]" if result["passed"] else "[bold red]NOT VERIFIED[/]"
    console.print(
        f"{verdict}: {result['bundle']} on base {result['base']}, in a fresh process "
        f"({result['seconds']:.0f}s)"
    )
    if result.get("recorded"):  # the export's record, in the lab that exported the bundle
        console.print(f"  [dim]recorded in {escape(result['recorded'])}[/]")
    elif result.get("not_recorded"):
        console.print(f"  [dim]not recorded: {escape(result['not_recorded'])}[/]")
    if result.get("not_checked"):  # what the verdict does not cover
        unchecked = escape("; ".join(result["not_checked"]))
        console.print(f"  [yellow]not checked[/], so not part of that verdict: {unchecked}")
    if result.get("fix"):
        console.print(f"  what to do: {escape(result['fix'])}")
