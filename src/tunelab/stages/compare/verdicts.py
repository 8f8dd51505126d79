"""`tunelab compare`: every run beside the reference baseline, with guardrails and a verdict.

The reference is the strongest baseline on the primary metric unless `--against` names one:
a variant has to beat what the pretrained model already gives for free. Differences are
paired: both runs are scored on the same validation examples, resampled together.

Each variant is set beside the reference (`vs_reference`, and for backwards compatibility
`guardrails`, `verdict`, `reasons` at the top of its row) and, when its record names a
`parent` that is completed on the same data version, beside that parent too (`vs_parent`,
with the recorded diff and reason). Each paired view holds the bootstrap interval, McNemar
(0/1 per-example values), per-example flips and the concentration check (`stats.concentration`).

Per-example values: classification uses correctness (`predicted == gold`) whatever the
primary metric, since macro-F1 is not a sum over examples; generative tasks use the primary
metric's per-example value (`example_values`), and an example counts as right for flips when
that value is 1 (e.g. exact match, or every field exact for `field_accuracy`).

Verdict: `improved` needs the minimum effect, the interval above zero and every guardrail.
A concentrated gain, a different platform or protocol are warnings (`warnings`, and the
concentration also in `reasons`): they do not change the verdict, which answers "is the
difference real on these examples"; they say where to look before trusting it.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from tunelab.core.env import PLATFORM_PACKAGES
from tunelab.core.lab import Lab
from tunelab.core.spec import Guardrail, Hypothesis
from tunelab.core.store import StoreError, read_jsonl
from tunelab.stages.compare.stats import (
    accuracy_rows,
    concentration,
    flips,
    macro_f1_rows,
    mcnemar_exact,
    paired_bootstrap,
)
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
    by_id = {r["id"]: r for r in runs}
    cache: dict[str, dict] = {}

    def preds_of(run_id: str) -> dict[str, dict]:
        if run_id not in cache:
            cache[run_id] = _predictions(store, run_id)
        return cache[run_id]

    def paired(before: dict, run: dict) -> dict:
        versus = _versus(before, run, preds_of(before["id"]), preds_of(run["id"]), labels, primary)
        versus["guardrails"] = [_guardrail(g, before, run, task) for g in lab.spec.guardrails]
        versus["verdict"], versus["reasons"] = _verdict(versus, hypothesis)
        versus["warnings"] = _warnings(before, run, versus)
        return versus

    rows = []
    for run in runs:
        row = _row(run, task)
        if run["kind"] == "variant" and run["id"] != reference["id"]:
            vs = paired(reference, run)
            row["vs_reference"] = {k: vs.pop(k) for k in _VERSUS_KEYS if k in vs}
            row["against"] = reference["id"]
            row.update(vs)  # guardrails, verdict, reasons, warnings
            row["parent"], row["reason"] = run.get("parent"), run.get("reason")
            _add_parent(row, run, by_id, store, version, paired)
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


_VERSUS_KEYS = ("metric", "bootstrap", "mcnemar", "flips", "concentration")


def _versus(
    reference: dict, run: dict, ref_preds: dict, preds: dict, labels: list[str], primary: str
) -> dict:
    """Paired statistics of `run` against `reference` on the same examples."""
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
        right_a, right_b = a == gold, b == gold
        return {
            "metric": primary,
            "bootstrap": paired_bootstrap(metric, gold, a, b),
            "mcnemar": mcnemar_exact(right_a, right_b),
            "flips": flips(ids, right_a, right_b),
            "concentration": concentration(right_a, right_b),
        }
    # generative: every metric is a mean of per-example values
    a = np.array([example_values(ref_preds[i], primary) for i in ids])
    b = np.array([example_values(preds[i], primary) for i in ids])
    zeros = np.zeros(len(ids))
    result = {"metric": primary, "bootstrap": paired_bootstrap(_mean_of_pred, zeros, a, b)}
    if set(np.unique(np.concatenate([a, b]))) <= {0.0, 1.0}:
        result["mcnemar"] = mcnemar_exact(a == 1, b == 1)
    result["flips"] = flips(ids, a >= 1, b >= 1)
    result["concentration"] = concentration(a, b)
    return result


def _add_parent(row: dict, run: dict, by_id: dict, store, version: str, paired) -> None:
    """`vs_parent` when the run's parent is completed on the same data version, else a
    warning that says why there is none."""
    parent_id = run.get("parent")
    if not parent_id:
        return
    parent = by_id.get(parent_id)
    if parent is None:
        try:
            record = store.read_record(parent_id)
            why = (
                f"is {record['status']}"
                if record["status"] != "completed"
                else f"is on data version {record['data_version']}, not {version}"
            )
        except StoreError:
            why = "is not in the store"
        row["warnings"].append(f"parent {parent_id} {why}: no paired comparison with it")
        return
    vs = paired(parent, run)
    row["vs_parent"] = {
        "run": parent_id,
        **vs,
        "diff": run.get("diff"),
        "reason": run.get("reason"),
    }


def env_differences(a: dict | None, b: dict | None) -> list[str]:
    """What differs between two environment records: torch, transformers and peft versions,
    the torch build (CUDA / ROCm) and the device type. Empty when either is unknown."""
    if not a or not b:
        return []
    out = []
    pa, pb = a.get("packages") or {}, b.get("packages") or {}
    for name in PLATFORM_PACKAGES:
        if pa.get(name) != pb.get(name):
            out.append(f"{name} {pa.get(name)} -> {pb.get(name)}")
    for key, name in (("torch_cuda", "CUDA build"), ("torch_hip", "ROCm build")):
        if a.get(key) != b.get(key):
            out.append(f"{name} {a.get(key)} -> {b.get(key)}")
    da, db = (a.get("device") or {}).get("type"), (b.get("device") or {}).get("type")
    if da != db:
        out.append(f"device {da} -> {db}")
    return out


def _warnings(before: dict, run: dict, versus: dict) -> list[str]:
    """Concentrated gain, a different platform, a different evaluation protocol."""
    out = []
    c = versus["concentration"]
    if c["concentrated"]:
        out.append(_concentration_note(c, versus["flips"]))
    env = env_differences(before.get("env"), run.get("env"))
    if env:
        out.append(
            f"{run['id']} ran on a different platform than {before['id']}: "
            + ", ".join(env)
            + "; a new platform means the checks are redone (`tunelab check`)"
        )
    pa, pb = before.get("protocol"), run.get("protocol")
    if pa and pb and pa != pb:
        keys = sorted(k for k in set(pa) | set(pb) if pa.get(k) != pb.get(k))
        out.append(
            f"{run['id']} was evaluated under a different protocol than {before['id']}: "
            + ", ".join(f"{k} {pa.get(k)} -> {pb.get(k)}" for k in keys)
        )
    return out


def _concentration_note(c: dict, f: dict) -> str:
    return (
        f"the gain comes from a handful of examples: without the {c['k']} most improved of "
        f"{c['n']} it is {c['delta_without_top_k']:+.4f} per example "
        f"(fixed {f['fixed']['count']}, broken {f['broken']['count']}, net {f['net']} "
        f"<= {c['k']})"
    )


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


def _verdict(versus: dict, hypothesis: Hypothesis) -> tuple[str, list[str]]:
    """`guardrail broken`, `improved` (effect met, interval above zero), or `no evidence`.

    A concentrated gain is added to the reasons but does not change the verdict."""
    c = versus["concentration"]
    extra = [_concentration_note(c, versus["flips"])] if c["concentrated"] else []
    broken = [g for g in versus["guardrails"] if not g["passed"]]
    if broken:
        return "guardrail broken", [
            f"{g['metric']} ({g['scope']}) dropped more than {g['max_drop']}: "
            + ", ".join(f"{k} -{v:.3f}" for k, v in g["failing"].items())
            for g in broken
        ] + extra
    boot = versus["bootstrap"]
    reasons = [
        f"{hypothesis.metric} {boot['delta']:+.4f} "
        f"(95% CI {boot['low']:+.4f} to {boot['high']:+.4f}), "
        f"minimum effect {hypothesis.min_effect}"
    ]
    if boot["delta"] >= hypothesis.min_effect and boot["low"] > 0:
        return "improved", reasons + extra
    if boot["low"] <= 0:
        reasons.append("the interval includes zero")
    if boot["delta"] < hypothesis.min_effect:
        reasons.append("the gain is below the minimum effect")
    return "no evidence", reasons + extra
