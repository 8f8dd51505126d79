"""`tunelab compare`: every run beside the reference baseline, with guardrails and a verdict.

The reference is the strongest baseline on the primary metric unless `--against` names one:
a variant has to beat what the pretrained model already gives for free. Differences are
paired: both runs are scored on the same validation examples, resampled together.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from tunelab.lab import Lab
from tunelab.spec import Guardrail, Hypothesis
from tunelab.stats import accuracy_rows, macro_f1_rows, mcnemar_exact, paired_bootstrap
from tunelab.store import StoreError, read_jsonl
from tunelab.tasks import get_task


def compare(lab: Lab, against: str | None = None) -> dict:
    store = lab.store
    version = store.current_data()
    labels = store.data_manifest(version)["labels"]
    runs = [r for r in store.runs() if r["status"] == "completed" and r["data_version"] == version]
    baselines = [r for r in runs if r["kind"] == "baseline"]
    if not baselines:
        raise StoreError(
            f"no completed baseline on data version {version}: run `tunelab baseline` first."
        )
    task = get_task(lab.spec.task.type)
    hypothesis = lab.spec.hypothesis or Hypothesis(
        behaviour="(no hypothesis in the spec)", metric=task.default_metric, min_effect=0
    )
    primary = hypothesis.metric
    if against:
        matches = [r for r in runs if r["id"] == against]
        if not matches:
            raise StoreError(
                f"--against {against!r}: no completed run with that id on data "
                f"version {version}; known: {[r['id'] for r in runs]}"
            )
        reference = matches[0]
    else:
        reference = max(baselines, key=lambda r: r["metrics"][primary])
    ref_preds = _predictions(store, reference["id"])
    rows = []
    for run in runs:
        row = _row(run, task)
        if run["kind"] == "variant" and run["id"] != reference["id"]:
            preds = _predictions(store, run["id"])
            row["vs_reference"] = _versus(reference, run, ref_preds, preds, labels, primary)
            row["guardrails"] = [_guardrail(g, reference, run, task) for g in lab.spec.guardrails]
            row["verdict"], row["reasons"] = _verdict(row, hypothesis)
        rows.append(row)
    return {
        "data_version": version,
        "task": task.name,
        "metrics": sorted(task.overall_metrics),
        "primary_metric": primary,
        "min_effect": hypothesis.min_effect,
        "reference": reference["id"],
        "labels": labels,
        "groups": task.group_key,
        "runs": rows,
    }


def _row(run: dict, task) -> dict:
    m = run["metrics"]
    row = {"id": run["id"], "kind": run["kind"], "method": run.get("method"), "n": m["n"]}
    row.update({k: m[k] for k in sorted(task.overall_metrics)})
    if task.group_key:
        row[task.group_key] = m[task.group_key]
    if "confusion" in m:
        row["confusion"] = m["confusion"]
    return row


def _predictions(store, run_id: str) -> dict[str, dict]:
    return {p["id"]: p for p in read_jsonl(store.run_dir(run_id) / "predictions.jsonl")}


def example_values(pred: dict, metric: str) -> float:
    """One example's contribution to a mean-type metric of a generative task."""
    score = pred["score"]
    fields = score.get("fields", {})
    if metric == "field_presence":
        return float(np.mean([f["present"] for f in fields.values()])) if fields else 1.0
    if metric == "field_accuracy":
        return float(np.mean([f["exact"] for f in fields.values()])) if fields else 1.0
    return float(score[metric])


def _versus(
    reference: dict, run: dict, ref_preds: dict, preds: dict, labels: list[str], primary: str
) -> dict:
    if set(ref_preds) != set(preds):
        raise StoreError(
            f"{run['id']} and {reference['id']} were scored on different examples; "
            "they cannot be compared pairwise."
        )
    ids = sorted(ref_preds)
    if "gold" in ref_preds[ids[0]]:  # classification: resample labels, recompute the metric
        index = {label: i for i, label in enumerate(labels)}
        gold = np.array([index[ref_preds[i]["gold"]] for i in ids])
        a = np.array([index[ref_preds[i]["predicted"]] for i in ids])
        b = np.array([index[preds[i]["predicted"]] for i in ids])
        metric = (
            accuracy_rows if primary == "accuracy" else partial(macro_f1_rows, n_labels=len(labels))
        )
        return {
            "metric": primary,
            "bootstrap": paired_bootstrap(metric, gold, a, b),
            "mcnemar": mcnemar_exact(a == gold, b == gold),
        }
    # generative: every metric is a mean of per-example values
    a = np.array([example_values(ref_preds[i], primary) for i in ids])
    b = np.array([example_values(preds[i], primary) for i in ids])
    zeros = np.zeros(len(ids))
    result = {"metric": primary, "bootstrap": paired_bootstrap(_mean_of_pred, zeros, a, b)}
    if set(np.unique(np.concatenate([a, b]))) <= {0.0, 1.0}:
        result["mcnemar"] = mcnemar_exact(a == 1, b == 1)
    return result


def _mean_of_pred(_: np.ndarray, values: np.ndarray) -> np.ndarray:
    return values.mean(axis=-1)


def _guardrail(g: Guardrail, reference: dict, run: dict, task) -> dict:
    ref, new = reference["metrics"], run["metrics"]
    if g.scope == "overall":
        checks = {"overall": (ref[g.metric], new[g.metric])}
    else:
        groups = task.group_key
        checks = {c: (ref[groups][c][g.metric], new[groups][c][g.metric]) for c in ref[groups]}
    failing = {
        name: round(before - after, 4)
        for name, (before, after) in checks.items()
        if before - after > g.max_drop + 1e-12
    }
    worst = max(before - after for before, after in checks.values())
    return {
        "metric": g.metric,
        "scope": g.scope,
        "max_drop": g.max_drop,
        "worst_drop": round(worst, 4),
        "passed": not failing,
        "failing": failing,
    }


def _verdict(row: dict, hypothesis: Hypothesis) -> tuple[str, list[str]]:
    """`guardrail broken`, `improved` (effect met, interval above zero), or `no evidence`."""
    broken = [g for g in row["guardrails"] if not g["passed"]]
    if broken:
        return "guardrail broken", [
            f"{g['metric']} ({g['scope']}) dropped more than {g['max_drop']}: "
            + ", ".join(f"{k} -{v:.3f}" for k, v in g["failing"].items())
            for g in broken
        ]
    boot = row["vs_reference"]["bootstrap"]
    reasons = [
        f"{hypothesis.metric} {boot['delta']:+.4f} "
        f"(95% CI {boot['low']:+.4f} to {boot['high']:+.4f}), "
        f"minimum effect {hypothesis.min_effect}"
    ]
    if boot["delta"] >= hypothesis.min_effect and boot["low"] > 0:
        return "improved", reasons
    if boot["low"] <= 0:
        reasons.append("the interval includes zero")
    if boot["delta"] < hypothesis.min_effect:
        reasons.append("the gain is below the minimum effect")
    return "no evidence", reasons
