"""The human view of `size`: measured step memory beside the estimate, and the advice."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def size(result: dict, console: Console) -> None:
    """The estimate's breakdown beside the measurement, the four step variants, the gradient
    check, the largest microbatch and the advice."""
    seq = result["seq_len"]
    console.print(
        f"[bold]size[/] {result['method']} on {result['device']}, {result['precision']}, "
        f"microbatch {result['microbatch']} × {seq['value']} tokens ({seq['source']}; "
        f"p50 {seq['p50']}, max {seq['max']})"
        + (
            f", of which {t['value']} target tokens (p50 {t['p50']}, max {t['max']})"
            if (t := result.get("target_tokens"))
            else ""
        )
        + f"; allocator: {result['allocator']}"
    )
    if "processes" in result:
        _processes(result, console)
        _advice(result, console)
        return
    e = result["estimate"]
    table = Table("estimate", "MiB", box=None, padding=(0, 1))
    table.columns[1].justify = "right"
    for name, mb in e["components_mb"].items():
        table.add_row(name.replace("_", " "), f"{mb:,.1f}")
    table.add_row(f"[bold]peak[/] (at {e['peak_phase'].replace('_', ' ')})", f"{e['peak_mb']:,.1f}")
    console.print(table)
    approx = " (approximate: shape family, or bf16 on BERT)" if e["approximate"] else ""
    heap = (
        "; the estimate counts the live tensors, and on CPU glibc's heap holds more (the "
        "largest-microbatch search scales by what this step showed)"
        if result["device"] == "cpu" and result["error_pct"] < 0
        else ""
    )
    console.print(
        f"measured peak {result['measured_peak_mb']:,.1f} MiB; estimate error "
        f"{result['error_pct']:+.1f}%{approx}{heap}"
    )
    if d := result.get("during_training"):
        _during(d, console)
    variants = Table(
        "variant",
        "micro×acc",
        "measured MiB",
        "estimate MiB",
        "error",
        "step s",
        "tok/s",
        box=None,
        padding=(0, 1),
    )
    for v in result["variants"]:
        shape = f"{v.get('microbatch', result['microbatch'])}×{v['accumulation']}"
        if v.get("oom"):
            variants.add_row(v["name"], shape, "[red]out of memory[/]", "", "", "", "")
            continue
        variants.add_row(
            v["name"],
            shape,
            f"{v['measured_peak_mb']:,.1f}",
            f"{v['estimated_peak_mb']:,.1f}",
            f"{v['error_pct']:+.1f}%",
            f"{v['step_s']:.2f}",
            f"{v['tokens_per_s']:,.0f}",
        )
    console.print(variants)
    g = result["gradient_check"]
    mark = "[green]equal[/]" if g["equal"] else "[red]DIFFERENT[/]"
    console.print(
        f"gradient check: accumulated microbatches vs one batch {mark} "
        f"(relative difference {g['rel_diff_accumulated']:.1e}, tolerance {g['tolerance']:.0e}); "
        f"a per-microbatch mean would give {g['rel_diff_per_microbatch_mean']:.1e}. "
        f"Normalisation: {g['normalisation']}"
    )
    big = result["largest_microbatch"]
    method, measured = big["method"], ""
    if big.get("measured_mb"):
        measured = f", measured {big['measured_mb']:,.0f} MiB"
    elif big.get("estimated_mb") and method == "estimate":  # not "estimate, estimated"
        method = f"estimated at {big['estimated_mb']:,.0f} MiB"
    elif big.get("estimated_mb"):
        measured = f", estimated {big['estimated_mb']:,.0f} MiB"
    cal = result.get("calibration")
    scaled = (
        f"; the step's estimate × {cal['factor']:.2f}, the allocator's share measured at "
        f"microbatch {cal['microbatch']}"
        if cal
        else ""
    )
    console.print(
        f"largest microbatch: [bold]{big['value']}[/] within {big['budget_mb']:,.0f} MiB "
        f"({big['budget']}; {method}{measured}{scaled})"
    )
    _advice(result, console)


def _during(d: dict, console: Console) -> None:
    """What the run holds beyond its steps (training.validate_every, keep: best), counted in
    the figures above."""
    kept = (
        f"training.keep: best holds a second copy of the trained weights "
        f"({d['best_weights_mb']:,.1f} MiB) through every step after the first measurement; "
        if d["keep_best"]
        else ""
    )
    step = d.get("measured_step_peak_mb")
    console.print(
        f"during training: {kept}the validation loss between steps, at evaluation.batch_size "
        f"{d['validation_batch']}, takes {d['validation_phase_mb']:,.1f} MiB beyond the weights "
        f"and AdamW's state (estimated), counted in the figures above"
        + (f"; measured: the steps alone {step:,.1f} MiB, with the pass " if step else "")
        + (f"{d['measured_peak_mb']:,.1f} MiB" if step else "")
    )
    if d.get("advice"):
        console.print(f"[yellow]note[/] {escape(d['advice'])}")


def _processes(result: dict, console: Console) -> None:
    """One rank's step among N processes: the per-rank estimate's terms, each rank's peak."""
    p = result["processes"]
    console.print(
        f"{p['strategy']} × {p['nproc']} processes (torchrun, OMP_NUM_THREADS="
        f"{p['omp_num_threads']}): each rank {p['examples_per_rank']} examples per step as "
        f"{p['accumulation_per_rank']} microbatch(es) of {p['microbatch']}"
    )
    if p.get("oversubscribed"):
        console.print(f"[yellow]warning[/] {escape(p['oversubscribed'])}")
    e = p["estimate"]
    table = Table("per-rank estimate", "MiB", "what", box=None, padding=(0, 1))
    table.columns[1].justify = "right"
    for name, mb in e["terms_mb"].items():
        table.add_row(name.replace("_", " "), f"{mb:,.1f}", f"[dim]{escape(e['terms'][name])}[/]")
    table.add_row(f"[bold]peak[/] (at {e['peak_phase'].replace('_', ' ')})", f"{e['peak_mb']:,.1f}")
    console.print(table)
    rows = Table("rank", "measured peak MiB", "baseline MiB", "step s", "tok/s", box=None)
    for r in p["ranks"]:
        rows.add_row(
            str(r["rank"]),
            f"{r['measured_peak_mb']:,.1f}",
            f"{r['baseline_mb']:,.1f}",
            f"{r['step_s']:.2f}",
            f"{r['tokens_per_s'] or 0:,.0f}",
        )
    console.print(rows)
    approx = " (approximate: see the estimate's terms)" if e["approximate"] else ""
    console.print(
        f"largest rank peak {p['max_peak_mb']:,.1f} MiB; per-rank estimate error "
        f"{p['error_pct']:+.1f}%{approx}"
    )
    big = result["largest_microbatch"]
    console.print(
        f"largest microbatch per rank: [bold]{big['value']}[/] within {big['budget_mb']:,.0f} "
        f"MiB ({big['budget']}; {big['method']})"
    )


def _measured_at(a: dict) -> str:
    """Where the expected speed comes from, when the advice's microbatch is another."""
    at = a.get("speed_measured_at")
    if not at or at == a["microbatch"]:
        return ""
    return f" (the speed measured at microbatch {at}; a larger one is often faster)"


def _advice(result: dict, console: Console) -> None:
    a = result["advice"]
    if a["fits"]:
        console.print(
            f"advice: microbatch {a['microbatch']} × accumulation {a['accumulation']} × "
            f"{a['processes']} process(es) = global batch {a['global_batch']}; expect "
            f"~{a['expected_tokens_per_s']:,.0f} tok/s, {a['expected_step_s']:.2f}s per step"
            + _measured_at(a)
        )
    else:
        console.print(f"[red]advice[/]: {escape(a['reason'])}")
    saved = f"saved to {result['file']}"
    if result.get("what_if"):  # kept beside the spec's own measurement, which `plan` cites
        given = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in result["what_if"].items())
        saved += f" (a what-if at {given}, beside the spec's own measurement)"
    console.print(f"[dim]{saved}[/]")
