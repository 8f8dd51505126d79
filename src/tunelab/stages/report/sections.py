"""What each section of the report shows, read from the store's records into plain values
(and inline SVG figures) for the template; nothing here renders HTML or writes a file."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from markupsafe import Markup

from tunelab.core.layout import PLANS
from tunelab.core.ledger import effective_status, summary
from tunelab.core.run_files import written_history
from tunelab.core.store import RUN_STATES, Store, StoreError, read_json
from tunelab.data.split_columns import split_columns
from tunelab.stages.report import charts
from tunelab.stages.report.curves import curves as loss_curves
from tunelab.tasks.pretrain import overall_metrics as PLAIN

GROUP_KEYS = {
    "per_class": ("class", "every_class", "f1"),
    "per_field": ("field", "every_field", "exact"),
    "per_source": ("source", "every_source", "bits_per_byte"),
}
"""Where a task keeps its per-group metrics: the group's name, guardrail scope, default metric."""
SPLIT_PAIRS = tuple(
    f"{a}-{b}"
    for i, a in enumerate(("train", "validation", "test"))
    for b in ("train", "validation", "test")[i:]
)
PAIRS_SHOWN = 10


def data_version(store: Store) -> dict | None:
    """The current data version: rows, quarantine, duplicates, conflicts, splits."""
    try:
        version = store.current_data()
    except StoreError:
        return None
    folder = store.data_dir(version)
    report = _read(folder / "report.json") or {}
    manifest = _read(folder / "manifest.json") or {}
    rows = manifest.get("rows") or {}
    dup = report.get("duplicates") or {}
    conflicts = report.get("conflicts") or {}
    return {
        "version": version,
        "created": manifest.get("created"),
        "rows": {k: report.get(k, rows.get(k)) for k in ROW_KEYS},
        "quarantine": (report.get("quarantine") or {}).get("reasons") or {},
        "duplicates": _duplicate_rows(dup.get("counts") or {}),
        "dedup_policy": dup.get("policy"),
        "pairs": (dup.get("pairs") or [])[:PAIRS_SHOWN],
        "pairs_total": dup.get("pairs_total", len(dup.get("pairs") or [])),
        "conflicts": {
            "policy": conflicts.get("policy"),
            "groups": conflicts.get("groups", 0),
            "rows": conflicts.get("rows", 0),
            "examples": conflicts.get("examples") or [],
        },
        **_split_counts(report, manifest),
        "cleaning": report.get("cleaning") or {},
        "presplit": bool(report.get("presplit")),
        "validation_from_train": report.get("validation_from_train"),
        "warnings": report.get("warnings") or [],
        "sources": manifest.get("sources") or [],
    }


ROW_KEYS = ("rows_read", "kept", "quarantined", "duplicates_removed")


def _split_counts(report: dict, manifest: dict) -> dict:
    """The split table in the template's shape (`data.split_columns`, as `tunelab data`)."""
    columns, per_split = split_columns(report, manifest)
    splits = {split: {"n": n, "labels": per} for split, (n, per) in per_split.items()}
    return {"splits": splits, "labels": columns}


def _duplicate_rows(counts: dict[str, int]) -> list[dict]:
    """Duplicate pairs by split pair, exact beside near (`near:train-test` keys)."""
    pairs = [p for p in SPLIT_PAIRS if p in counts or f"near:{p}" in counts]
    pairs += sorted({k.removeprefix("near:") for k in counts} - set(pairs))
    return [
        {"pair": p, "exact": counts.get(p, 0), "near": counts.get(f"near:{p}", 0)} for p in pairs
    ]


def runs(store: Store, records: list[dict]) -> dict[str, Any]:
    """The ledger: one row per run, with its state (lost detected) and why it ended so."""
    rows = []
    for record in records:
        row = summary(record, store.runs_dir / record["id"])
        training = record.get("training") or {}
        rows.append(
            row
            | {
                "parent": record.get("parent"),
                "steps": training.get("steps"),
                "seconds": training.get("seconds"),
                "peak_memory_mb": training.get("peak_memory_mb"),
                "note": _note(record, row["status"]),
                "error": record.get("error"),
            }
        )
    counts = Counter(r["status"] for r in rows)
    order = [*RUN_STATES, "lost"]
    states = sorted(counts.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99)
    versions = list(dict.fromkeys(r["data_version"] for r in rows))
    return {"runs": rows, "states": states, "run_data_versions": versions}


def _note(record: dict, status: str) -> str:
    """Why a run is in its state: the error's last line, the invalidation, the lost process;
    for a completed one, why it was made, its overfitting warning and the step it kept."""
    if status in ("failed", "interrupted"):
        lines = (record.get("error") or "").strip().splitlines()
        text = lines[-1] if lines else "no error recorded"
        if ": " in text and "." in text.split(": ", 1)[0]:  # `tunelab.core.errors.X: what`
            text = text.split(": ", 1)[1]
        if status == "interrupted" and record.get("checkpoint"):
            text += " — resumable from its checkpoint (`tunelab resume`)"
        return text
    if status == "invalid":
        inv = record.get("invalidated") or {}
        why, was = inv.get("why", "no reason recorded"), inv.get("previous_status", "?")
        return f"invalidated (was {was}): {why}"
    if status == "lost":
        proc = record.get("process") or {}
        return (
            f"its process (pid {proc.get('pid', '?')} on {proc.get('host', '?')}) ended without "
            "closing the run"
        )
    training = record.get("training") or {}
    went = (training.get("validation") or {}).get("overfitting")
    kept = training.get("kept") or {}
    said = [f"made because: {record['reason']}"] if record.get("reason") else []
    final = training.get("final_loss")
    if isinstance(final, float) and not math.isfinite(final):  # a run from before it stopped
        said.append(f"its training loss ended {final}: its weights are not numbers")
    chosen = (record.get("metrics") or {}).get("threshold")
    if isinstance(chosen, dict) and chosen.get("value") is not None:  # multilabel: shipped too
        said.append(
            f"decides at threshold {chosen['value']:g} on every label, chosen on "
            f"{chosen.get('chosen_on', 'validation')} for {chosen.get('metric', 'its metric')}"
        )
    for warning in ("diverged", "start_lost", "time_cap"):  # as `runs` and `compare` warn
        if (training.get(warning) or {}).get("message"):
            said.append(training[warning]["message"])
    if went:
        said.append(f"while it trained, {went['message']}")
    if kept.get("rule") == "best validation loss" and kept.get("step") != training.get("steps"):
        said.append(f"its weights are step {kept['step']}'s (`training.keep: best`)")
    return "; ".join(said)


def curves(records: list[dict], colours: dict[str, str], store: Store) -> Markup | None:
    """Loss and learning rate of every run that recorded a training history, and of a run
    that stopped before it could (interrupted, failed, lost) as far as it appended its
    history: an interrupted run's 23 steps had been on no curve."""
    histories, stopped = [], {}
    for r in records:
        history = (r.get("training") or {}).get("history")
        if not history and r.get("status") != "completed":
            history = written_history(store.runs_dir / r["id"])
            # as `runs` says it: a run recorded as running whose process died is lost
            stopped[r["id"]] = effective_status(r, store.runs_dir / r["id"])
        if history:
            histories.append((r["id"], history))
    return Markup(loss_curves(histories, colours, stopped)) if histories else None


def groups(records: list[dict], colours: dict[str, str], guardrails: list[dict]) -> dict | None:
    """Per-class (or per-field, or per-source) scores of every run that has them: bars for the
    group's default metric and each per-group guardrail's, a table of the first; shares in
    percent, a pretrain lab's bits per byte as they are (`plain`)."""
    scored = [r for r in records if any(k in (r.get("metrics") or {}) for k in GROUP_KEYS)]
    if not scored:
        return None
    key = next(k for k in GROUP_KEYS if k in scored[0]["metrics"])
    kind, scope, default = GROUP_KEYS[key]
    scored = [r for r in scored if key in r["metrics"]]
    groups = list(dict.fromkeys(g for r in scored for g in r["metrics"][key]))
    present = {m for r in scored for v in r["metrics"][key].values() for m in v}
    # the task's own per-group score first (per-field exact match, per-class F1), then what
    # the guardrails of that scope judge
    wanted = [default, *(g["metric"] for g in guardrails if g.get("scope") == scope)]
    metrics = [m for m in dict.fromkeys(wanted) if m in present] or sorted(present - {"support"})
    figures = []
    for metric in metrics[:3]:
        series = [(r["id"], _column(r["metrics"][key], metric)) for r in scored]
        chart = charts.group_bars(series, groups, metric, colours, percent=metric not in PLAIN)
        figures.append({"metric": metric, "chart": Markup(chart)})
    table = [
        {"group": g, "values": [_cell(r["metrics"][key].get(g), metrics[0]) for r in scored]}
        for g in groups
    ]
    return {
        "kind": kind,
        "runs": [r["id"] for r in scored],
        "metric": metrics[0],
        "plain": metrics[0] in PLAIN,
        "figures": figures,
        "table": table,
    }


def _column(by_group: dict[str, dict], metric: str) -> dict[str, float]:
    return {g: v.get(metric) for g, v in by_group.items() if isinstance(v, dict)}


def _cell(values: dict | None, metric: str) -> float | None:
    return values.get(metric) if isinstance(values, dict) else None


MATRIX_LABELS = 12
"""Past this many labels a run's confusions are listed, the most frequent first: a matrix of
77 intents is 5,929 cells no one reads."""
PAIRS_LISTED = 15


def confusions(records: list[dict]) -> list[dict]:
    """Each run's confusion matrix as rows of cells shaded by the share of the true label; past
    `MATRIX_LABELS` labels, its most frequent confusions instead (`_most_confused`)."""
    out = []
    for r in records:
        confusion = (r.get("metrics") or {}).get("confusion")
        if not confusion:
            continue
        labels, rows = confusion["labels"], []
        if len(labels) > MATRIX_LABELS:
            out.append({"run": r["id"], "labels": labels, **_most_confused(confusion)})
            continue
        for i, counts in enumerate(confusion["matrix"]):
            total = sum(counts) or 1
            cells = [_shade(n, n / total, i == j) for j, n in enumerate(counts)]
            rows.append({"label": labels[i], "cells": cells, "total": sum(counts)})
        out.append({"run": r["id"], "labels": labels, "rows": rows})
    return out


def _most_confused(confusion: dict) -> dict:
    """The off-diagonal cells with the most examples (true label, prediction, count, share of
    the true label's examples), and how many examples were confused in all."""
    labels, matrix = confusion["labels"], confusion["matrix"]
    cells = [
        (n, labels[i], labels[j], n / (sum(counts) or 1))
        for i, counts in enumerate(matrix)
        for j, n in enumerate(counts)
        if i != j and n
    ]
    cells.sort(key=lambda c: (-c[0], -c[3], c[1], c[2]))
    pairs = [
        {
            "true": t,
            "predicted": p,
            "n": n,
            "share": share,
            "style": _shade(n, share, False)["style"],
        }
        for n, t, p, share in cells[:PAIRS_LISTED]
    ]
    total = sum(sum(counts) for counts in matrix)
    return {"pairs": pairs, "confused": sum(c[0] for c in cells), "total": total}


def _shade(n: int, share: float, diagonal: bool) -> dict:
    """Blue on the diagonal (right), red off it (confused); deeper for a larger share."""
    rgb = "37, 99, 235" if diagonal else "220, 38, 38"
    alpha = 0.08 + 0.8 * share if n else 0.0
    ink = "#ffffff" if alpha > 0.55 else "#1f2937"
    return {"n": n, "style": f"background: rgba({rgb}, {alpha:.2f}); color: {ink}"}


def sizing(path: Path) -> dict:
    """One `tunelab size` record: the estimate by component beside the measured peak."""
    record = read_json(path)
    estimate = record.get("estimate") or {}
    components = estimate.get("components_mb") or {}
    variants = [
        v for v in record.get("variants") or [] if v.get("measured_peak_mb") is not None
    ] or [
        {
            "name": "plain",
            "estimated_peak_mb": estimate.get("peak_mb"),
            "measured_peak_mb": record.get("measured_peak_mb"),
        }
    ]
    chart = charts.memory(components, variants, f"memory-{path.stem}") if components else None
    seq = record.get("seq_len")
    return {
        "file": path.name,
        "device": record.get("device"),
        "method": record.get("method"),
        "precision": record.get("precision"),
        "data_version": record.get("data_version"),
        "seq_len": seq.get("value") if isinstance(seq, dict) else seq,
        "microbatch": record.get("microbatch"),
        "what_if": record.get("what_if"),  # --seq-len / --microbatch, not the spec's own step
        "components": components,
        "estimated_peak_mb": estimate.get("peak_mb"),
        "peak_phase": estimate.get("peak_phase"),
        "measured_peak_mb": record.get("measured_peak_mb"),
        "error_pct": record.get("error_pct"),
        "variants": record.get("variants") or [],
        "largest": (record.get("largest_microbatch") or {}).get("value"),
        "advice": record.get("advice") or {},
        "chart": Markup(chart) if chart else None,
    }


def plan(store: Store) -> dict | None:
    """The newest `tunelab plan` record, its phases on a timeline."""
    paths = store.numbered(PLANS)
    if not paths:
        return None
    record = read_json(paths[-1])
    phases = [p for p in record.get("phases") or [] if isinstance(p, dict)]
    cost = record.get("cost")
    return {
        "id": record.get("id") or paths[-1].stem,
        "created": record.get("created"),
        "days": record.get("days"),
        "hours_total": record.get("hours_total"),
        "overrides": record.get("overrides") or {},
        "phases": phases,
        "stop_after": (record.get("variants") or {}).get("stop_after"),
        "price_per_hour": record.get("price_per_hour"),
        "cost": cost if isinstance(cost, dict) else {"total": cost} if cost is not None else {},
        "warnings": record.get("warnings") or [],
        "chart": Markup(charts.timeline(phases, record.get("days"))) if phases else None,
    }


# --- helpers ---------------------------------------------------------------------------------


def _read(path: Path) -> Any:
    return read_json(path) if path.is_file() else None


def as_of(records: list[dict], events: list[dict]) -> str | None:
    """The newest time in the records: the page is the lab as of then."""
    times = [e.get("time") for e in events] + [r.get("updated") for r in records]
    return max((t for t in times if isinstance(t, str)), default=None)


def noise_floors(store: Store) -> list[dict]:
    """Each measured noise floor (`tunelab noise`): the run, its seeds, and every metric's mean,
    sd and range over them, in the order `tunelab noise` prints them."""
    floors = []
    for record in store.noise_records():
        rows = []
        for scope, metrics in (record.get("spread") or {}).items():
            named = (
                metrics.items()
                if scope == "overall"
                else (
                    (f"{m} {group}", s)
                    for group, values in metrics.items()
                    for m, s in values.items()
                )
            )
            for name, s in named:
                base = name.split(" ")[0]  # the metric, which says how its value reads
                rows.append({"metric": name, "base": base, "scope": scope} | _spread(s))
        floors.append(
            {
                "id": record["id"],
                "of": record.get("of"),
                "runs": record.get("runs") or [],
                "seeds": record.get("seeds") or [],
                "created": record.get("created"),
                "rows": rows,
                "sd_interval": record.get("sd_interval"),  # a record before it was kept: none
            }
        )
    return floors


def _spread(stats: dict) -> dict:
    return {k: stats.get(k) for k in ("mean", "sd", "range")}
