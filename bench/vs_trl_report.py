"""bench/vs_trl.py's numbers and tables: each run checked to have done the same work, its
columns and quality curve (one scorer for both tools), the medians and the ratio against the
issue's goal, each tool's time to reach the other's exact match, the notes, and the markdown."""

from __future__ import annotations

import statistics
from pathlib import Path

from run_cost import cost, cost_ratios

MEASURES = ("train_s", "tok_s", "peak_mb", "delta_mb", "exact_match", "json_valid")
GOAL = 0.70
"""tunelab's training time / TRL's at which the issue's goal is met (with exact match >=)."""


def check_same_work(result: dict, tool: str, prepared: dict, trl_rejected: list | None) -> None:
    """Both trained the planned steps on the lab's train pages and answered the chosen pages."""
    problems, chosen = [], sorted(prepared["validation_ids"])
    answered = [sorted(o["id"] for o in outs) for outs in result["curve_outputs"].values()]
    if any(ids != chosen for ids in [sorted(o["id"] for o in result["outputs"]), *answered]):
        problems.append("its answers are not of the chosen validation pages")
    if result["steps"] != prepared["steps"]:
        problems.append(f"it trained {result['steps']} steps, not {prepared['steps']}")
    if tool == "trl":
        kept = [i for i in prepared["train_ids"] if i not in set(result["rejected_train"])]
        if result["train_ids"] != kept:
            problems.append("it trained on other pages than the lab's train split")
        if result["base"] != prepared["base"]:
            problems.append(f"it loaded {result['base']}, not the lab's cached base")
    else:
        if result["data_version"] != prepared["version"]:
            problems.append(f"it trained on another data version ({result['data_version']})")
        if trl_rejected is not None and result["rejected_train"] != trl_rejected:
            problems.append("it left out other train pages than TRL did")
    if problems:
        raise SystemExit(f"{tool}: not the same work: " + "; ".join(problems))


def summarise(result: dict, score) -> dict:
    """A run's columns, and its quality curve (each point: step, seconds, its scores)."""
    final = score(result["outputs"])
    seconds = result["step_seconds"]
    curve = [
        {"step": int(s), "seconds": seconds[int(s) - 1], **score(outs)}
        for s, outs in sorted(result["curve_outputs"].items(), key=lambda kv: int(kv[0]))
    ]
    curve.append({"step": result["steps"], "seconds": seconds[-1], **final})
    return {
        **cost(result),
        **final,
        "steps": result["steps"],
        "threads": result["torch_threads"],
        "curve": curve,
    }


def medians(rows: list[dict], tool: str) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in rows if r["tool"] == tool) for k in MEASURES}


def ratios(rows: list[dict]) -> dict:
    """Median tunelab against median TRL, and whether the issue's goal is met."""
    t, q = medians(rows, "tunelab"), medians(rows, "trl")
    time = t["train_s"] / q["train_s"]
    return {
        "train_s": time,
        **cost_ratios(t, q),
        "exact_match_pts": 100 * (t["exact_match"] - q["exact_match"]),
        "json_valid_pts": 100 * (t["json_valid"] - q["json_valid"]),
        "goal_met": time <= GOAL and t["exact_match"] >= q["exact_match"],
        "medians": {"tunelab": t, "trl": q},
    }


def first_reach(curve: list[dict], level: float) -> float | None:
    """The training seconds at the first point of `curve` scoring `level` or more."""
    return next((p["seconds"] for p in curve if p["exact_match"] >= level - 1e-9), None)


def pairs(rows: list[dict]):
    """(repeat, tunelab's row, TRL's row) for each repeat."""
    for repeat in sorted({r["repeat"] for r in rows}):
        mine = {r["tool"]: r for r in rows if r["repeat"] == repeat}
        yield repeat, mine["tunelab"], mine["trl"]


def reach(rows: list[dict]) -> list[dict]:
    """Per repeat: each tool's time to the other's final exact match, and both tools' time to
    the best level both reach (each reaches it: it is at most each one's best)."""
    out = []
    for repeat, tl, tr in pairs(rows):
        common = min(max(p["exact_match"] for p in r["curve"]) for r in (tl, tr))
        a, b = first_reach(tl["curve"], common), first_reach(tr["curve"], common)
        out.append(
            {
                "repeat": repeat,
                "tunelab_to_trl": [tr["exact_match"], first_reach(tl["curve"], tr["exact_match"])],
                "trl_to_tunelab": [tl["exact_match"], first_reach(tr["curve"], tl["exact_match"])],
                "common": [common, a, b],
                "ratio": a / b if b else None,
            }
        )
    return out


def notes(rows: list[dict], prepared: dict) -> list[str]:
    """What a reader should know to read the numbers, and any disagreement found."""
    out = []
    for repeat, tl, tr in pairs(rows):
        a, b = tl["raw"]["step_tokens"], tr["raw"]["step_tokens"]
        same = f"#{repeat}: the same tokens at each of the {len(a)} steps (the same batches)"
        lrs = tl["raw"]["lrs"], tr["raw"]["lrs"]
        rates = len(lrs[0]) == len(lrs[1]) and all(
            abs(x - y) <= 1e-9 * abs(x) for x, y in zip(*lrs, strict=False)
        )
        out.append(
            (same if a == b else f"#{repeat}: the per-step token counts differ (other batches)")
            + ("; the same learning rates." if rates else f"; learning rates differ: {lrs}.")
        )
    n, total = len(prepared["validation_ids"]), prepared["validation_total"]
    if n < total:
        out.append(f"only the first {n} of {total} validation pages were scored (--validation).")
    for r in rows:
        raw = r["raw"]
        if r["tool"] == "trl":
            m, tp = raw["masks"], raw["text_path"]
            out.append(
                f"TRL #{r['repeat']}: inputs checked before training: {m['rows']} rows' labels "
                f"({m['loss_tokens']:,} loss tokens) and {m['batches_compared']} collated "
                f"microbatches equal tunelab's. Text path: {tp['differ']} of {tp['rows']} rows "
                f"would tokenise otherwise as one string ({tp['example'] or 'none'})."
            )
        elif raw["own_metrics"] != {k: r[k] for k in raw["own_metrics"]}:
            out.append(f"tunelab #{r['repeat']}: its run's own metrics {raw['own_metrics']}")
    if prepared["curve_steps"]:
        out.append(
            f"quality curve: copies after steps {prepared['curve_steps']} and the final weights, "
            "evaluated after training (off the clock)."
        )
    return out


# --- the markdown --------------------------------------------------------------------------


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def secs(x: float | None) -> str:
    return "not reached" if x is None else f"{x:.1f}"


def markdown(result: dict) -> str:
    m, p = result["machine"], result["prepared"]
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    threads = ", ".join(str(t) for t in sorted({r["threads"] for r in result["runs"]}))
    parts = [
        f"`{result['command']}`\n\nMachine: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} "
        f"usable), torch threads {threads}. Load average {m['load_before']:.2f} before, "
        f"{result['load_after']:.2f} after. Versions: {versions}, Python {m['python']}.\n"
        f"Lab {p['lab']}, data version {p['version']}: {len(p['train_ids'])} train pages, "
        f"{len(p['validation_ids'])} of {p['validation_total']} validation pages; {p['steps']} "
        f"steps. Base: {Path(p['model']).name}, dequantized to {p['base']}.",
        "| tool | # | train s | tok/s | peak MiB | Δ MiB | exact match | JSON valid | steps "
        "| tokens |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    parts[-1] += "".join(
        f"\n| {r['tool']} | {r['repeat']} | {r['train_s']:.1f} | {r['tok_s']:,.0f} "
        f"| {r['peak_mb']:,.0f} | {r['delta_mb']:,.0f} | {pct(r['exact_match'])} "
        f"| {pct(r['json_valid'])} | {r['steps']} | {r['tokens']:,} |"
        for r in result["runs"]
    )
    q = result["ratios"]
    delta = "n/a" if q["delta_mb"] is None else f"{q['delta_mb']:.2f}"
    parts.append(
        f"Median tunelab / median TRL (train s below 1: tunelab faster; the goal: <= {GOAL:.2f} "
        "with exact match >=); metrics: tunelab - TRL in points.\n\n"
        "| train s | tok/s | peak MiB | Δ MiB | exact match | JSON valid | goal |\n"
        "|--:|--:|--:|--:|--:|--:|---|\n"
        f"| {q['train_s']:.2f}x | {q['tok_s']:.2f}x | {q['peak_mb']:.2f} | {delta} "
        f"| {q['exact_match_pts']:+.1f} | {q['json_valid_pts']:+.1f} "
        f"| {'met' if q['goal_met'] else 'not met'} |"
    )
    lines = [
        "Time to reach an exact match (training seconds at the first curve point that scores "
        "it):\n\n| # | tunelab to TRL's | TRL to tunelab's | best both reach | tunelab s | TRL s "
        "| tunelab / TRL |\n|--:|--:|--:|--:|--:|--:|--:|"
    ]
    for x in result["reach"]:
        (a, ta), (b, tb), (c, tc, qc) = x["tunelab_to_trl"], x["trl_to_tunelab"], x["common"]
        ratio = "n/a" if x["ratio"] is None else f"{x['ratio']:.2f}"
        lines.append(
            f"| {x['repeat']} | {pct(a)}: {secs(ta)} | {pct(b)}: {secs(tb)} | {pct(c)} "
            f"| {secs(tc)} | {secs(qc)} | {ratio} |"
        )
    parts.append("\n".join(lines))
    parts.append(
        "Curves (step: exact match at training seconds):\n\n"
        + "\n".join(
            f"- {r['tool']} #{r['repeat']}: "
            + "; ".join(
                f"{c['step']}: {pct(c['exact_match'])} at {c['seconds']:.1f} s" for c in r["curve"]
            )
            for r in result["runs"]
        )
    )
    parts.append(settings_table(result["runs"]))
    parts.append("\n".join(f"Note: {n}" for n in result["notes"]))
    return "\n\n".join(parts)


SETTINGS = ("lr", "optimizer", "schedule", "warmup", "weight_decay", "max_grad_norm", "batch")
SETTINGS += ("seed", "trainable", "lora", "precision", "checkpointing", "max_length", "loss")


def settings_table(runs: list[dict]) -> str:
    """What each side ran with (its first repeat), read back from each tool."""
    lines = [
        "Settings as each tool ran them (batch: microbatch x accumulation):\n",
        "| tool | " + " | ".join(SETTINGS) + " |",
        "|---|" + "---|" * len(SETTINGS),
    ]
    for r in (r for r in runs if r["repeat"] == 1):
        s = r["raw"]["settings"]
        lines.append(f"| {r['tool']} | " + " | ".join(str(s.get(k, "")) for k in SETTINGS) + " |")
    other = next((r["raw"]["settings"].get("other") for r in runs if r["tool"] == "tunelab"), "")
    return "\n".join(lines) + (f"\n\ntunelab's other spec fields: {other}" if other else "")
