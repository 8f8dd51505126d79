"""bench/vs_hf_trainer.py's numbers and tables: each run checked to have read the chosen
rows, its metrics (scikit-learn, the same for both tools), the medians and ratios per mode and
method, the notes a reader needs, and the markdown."""

from __future__ import annotations

import statistics

from run_cost import cost, cost_ratios
from vs_hf_trainer_setup import BATCH


def check_same_data(result: dict, tool: str, prepared: dict, mode: str) -> None:
    """The run trained on the chosen train rows and predicted the chosen validation rows."""
    splits, problems = prepared["splits"], []
    if sorted(p["id"] for p in result["predictions"]) != [r["id"] for r in splits["validation"]]:
        problems.append("its predictions are not of the chosen validation rows")
    if tool == "trainer":
        if sorted(result["train_ids"]) != [r["id"] for r in splits["train"]]:
            problems.append("it read other train rows")
        if result["files_sha256"] != {s: f["sha256"] for s, f in prepared["files"].items()}:
            problems.append("the files it read are not the ones written")
    else:
        if result["data_version"] != prepared["labs"][mode]["version"]:
            problems.append(f"it trained on another data version ({result['data_version']})")
        if result["rejected_train"]:
            problems.append(f"{result['rejected_train']} train rows could not be rendered")
    if problems:
        raise SystemExit(f"{tool} ({mode}): not the same data: " + "; ".join(problems))


def metrics(predictions: list[dict], labels: list[str]) -> dict:
    from sklearn.metrics import accuracy_score, f1_score

    gold = [p["gold"] for p in predictions]
    pred = [p["predicted"] for p in predictions]
    return {
        "accuracy": float(accuracy_score(gold, pred)),
        "macro_f1": float(f1_score(gold, pred, labels=labels, average="macro", zero_division=0)),
    }


def summarise(result: dict, labels: list[str]) -> dict:
    return {
        **cost(result),
        **metrics(result["predictions"], labels),
        "steps": result["steps"],
        "threads": result["torch_threads"],
    }


MEASURES = ("train_s", "tok_s", "peak_mb", "delta_mb", "accuracy", "macro_f1")


def medians(rows: list[dict], mode: str, method: str, tool: str) -> dict[str, float]:
    mine = [r for r in rows if (r["mode"], r["method"], r["tool"]) == (mode, method, tool)]
    return {k: statistics.median(r[k] for r in mine) for k in MEASURES}


def ratios(rows: list[dict]) -> list[dict]:
    """Per mode and method: median tunelab against median Trainer."""
    out = []
    for mode, method in dict.fromkeys((r["mode"], r["method"]) for r in rows):
        t, h = (medians(rows, mode, method, tool) for tool in ("tunelab", "trainer"))
        out.append(
            {
                "mode": mode,
                "method": method,
                "speed": h["train_s"] / t["train_s"],
                **cost_ratios(t, h),
                "accuracy_pts": 100 * (t["accuracy"] - h["accuracy"]),
                "macro_f1_pts": 100 * (t["macro_f1"] - h["macro_f1"]),
                "medians": {"tunelab": t, "trainer": h},
            }
        )
    return out


def notes(rows: list[dict], n_train: int) -> list[str]:
    """What a reader should know to read the numbers, and any disagreement found."""
    out = [
        "each tool draws its batches in its own seeded order (and its own dropout masks), so at "
        "equal settings the metrics differ by that alone (a different seed's noise)."
    ]
    if n_train % BATCH:
        out.append(
            f"{n_train} train rows are not a multiple of the batch ({BATCH}): the Trainer ends "
            "the epoch on a short batch, tunelab fills its last batch from a second epoch, so "
            "their work differs (compare tok/s, not seconds)."
        )
    for r in rows:
        own = r["raw"].get("own_metrics")
        if own and any(abs(own[k] - r[k]) > 1e-9 for k in own):
            out.append(f"{r['mode']} {r['method']} #{r['repeat']}: tunelab's own metrics {own}")
    for mode, method in dict.fromkeys((r["mode"], r["method"]) for r in rows):
        tokens = {r["tokens"] for r in rows if (r["mode"], r["method"]) == (mode, method)}
        if len(tokens) > 1 and n_train % BATCH == 0:  # one epoch: every row once, both tools
            out.append(f"{mode} {method}: one epoch, yet different token counts {sorted(tokens)}")
    return out


# --- the markdown --------------------------------------------------------------------------


def markdown(result: dict) -> str:
    parts = [header(result), runs_table(result["runs"]), ratios_table(result["ratios"])]
    parts.append(settings_table(result["runs"]))
    parts.append("\n".join(f"Note: {n}" for n in result["notes"]))
    return "\n\n".join(parts)


def _kernels(m: dict) -> str:
    k = m.get("kernels") or {}
    return f"ATen {k.get('aten', '?')}, oneDNN up to {k.get('onednn_max_isa', '?')}"


def header(result: dict) -> str:
    m, d = result["machine"], result["data"]
    flags = ", ".join(f"{f} {'yes' if on else 'no'}" for f, on in m["flags"].items())
    threads = ", ".join(str(t) for t in sorted({r["threads"] for r in result["runs"]}))
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    dropped = ", ".join(f"{k} {v}" for k, v in d["dropped"].items())
    return "\n".join(
        [
            f"`{result['command']}`",
            "",
            f"Machine: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), torch "
            f"threads {threads}; {flags}; kernels: {_kernels(m)}. Load average "
            f"{m['load_before']:.2f} before, "
            f"{result['load_after']:.2f} after.",
            f"Versions: {versions}, Python {m['python']}.",
            f"Data: {d['train']} train / {d['validation']} validation rows (stratified, seed "
            f"{d['seed']}) of {d['pool']} distinct articles (left out: {dropped}); the same two "
            "files for both tools.",
        ]
    )


def runs_table(runs: list[dict]) -> str:
    lines = [
        "| mode | method | tool | # | train s | tok/s | peak MiB | Δ MiB | accuracy | macro-F1 "
        "| steps | tokens |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in runs:
        lines.append(
            f"| {r['mode']} | {r['method']} | {r['tool']} | {r['repeat']} | {r['train_s']:.1f} "
            f"| {r['tok_s']:,.0f} | {r['peak_mb']:,.0f} | {r['delta_mb']:,.0f} "
            f"| {100 * r['accuracy']:.1f} | {100 * r['macro_f1']:.1f} | {r['steps']} "
            f"| {r['tokens']:,} |"
        )
    return "\n".join(lines)


def ratios_table(ratios: list[dict]) -> str:
    lines = [
        "Median tunelab / median Trainer. Speed (1 / train s) and tok/s: > 1 means tunelab is "
        "faster; memory: < 1 means tunelab uses less; metrics: tunelab - Trainer in points.",
        "",
        "| mode | method | speed | tok/s | peak MiB | Δ MiB | accuracy | macro-F1 |",
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    for q in ratios:
        delta = "n/a" if q["delta_mb"] is None else f"{q['delta_mb']:.2f}"
        lines.append(
            f"| {q['mode']} | {q['method']} | {q['speed']:.2f}x | {q['tok_s']:.2f}x "
            f"| {q['peak_mb']:.2f} | {delta} | {q['accuracy_pts']:+.1f} "
            f"| {q['macro_f1_pts']:+.1f} |"
        )
    return "\n".join(lines)


SETTINGS = ("lr", "optimizer", "schedule", "warmup", "weight_decay", "max_grad_norm", "batch")
SETTINGS += ("seed", "eval_batch", "head", "trainable", "lora", "other")


def settings_table(runs: list[dict]) -> str:
    """What each side ran with (its first repeat), read back from each tool."""
    lines = [
        "Settings as each tool ran them (batch: microbatch x accumulation):",
        "",
        "| mode | method | tool | " + " | ".join(SETTINGS) + " |",
        "|---|---|---|" + "---|" * len(SETTINGS),
    ]
    for r in runs:
        if r["repeat"] == 1:
            s = r["raw"]["settings"]
            values = " | ".join(str(s.get(k, "")) for k in SETTINGS)
            lines.append(f"| {r['mode']} | {r['method']} | {r['tool']} | {values} |")
    return "\n".join(lines)
