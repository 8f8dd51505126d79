"""Each run's row of a comparison: its metrics and seeds, and for a variant its paired views
(against the reference, against its parent, another seed against its arm's first) with their
guardrails and verdicts (`verdicts.py` chooses the reference and writes the record).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tunelab.core.files import read_jsonl_hashed
from tunelab.core.layout import PREDICTIONS
from tunelab.core.replicates import seed_of
from tunelab.core.store import StoreError
from tunelab.data.same_eval import SameEval, differing_text, split_changes
from tunelab.stages.compare.collapse import collapse_warnings
from tunelab.stages.compare.forgetting import judge_forgetting
from tunelab.stages.compare.guardrails import judge
from tunelab.stages.compare.notes import pair_warnings
from tunelab.stages.compare.pairs import make_arms
from tunelab.stages.compare.rules import verdict
from tunelab.stages.compare.seeds import Arms
from tunelab.stages.compare.versus import VERSUS_KEYS, paired_stats


@dataclass
class Pairing:
    """What every paired view of one comparison shares: the frozen rules, the arms, and each
    run's predictions, read once and checked against its record."""

    store: Any
    task: Any
    labels: list[str]
    primary: str
    hypothesis: Any
    guardrails: list
    accept_unresolved: str | None
    arms: Arms
    by_id: dict[str, dict]
    """The runs compared, by id."""
    unscored: dict[str, str]
    """The reference's groups without a score (`unscored_groups`)."""
    _predictions: dict[str, dict] = field(default_factory=dict)

    def preds_of(self, run_id: str) -> dict[str, dict]:
        if run_id not in self._predictions:
            self._predictions[run_id] = _predictions(self.store, run_id, self.by_id.get(run_id))
        return self._predictions[run_id]

    def paired(self, before: list[dict], arm: list[dict], seed_only: str | None = None) -> dict:
        """The arm `arm` beside `before` (each a run and its other seeds): the paired
        statistics, each guardrail, the verdict and its reasons, the warnings. `seed_only`:
        the run `arm` differs from in its seed alone (judged against seed noise)."""
        noise = () if seed_only else self.arms.noise_for(before, arm, self.preds_of)
        trained = (before[0]["kind"] != "baseline", arm[0]["kind"] != "baseline")
        pair = make_arms(
            [self.preds_of(r["id"]) for r in before],
            [self.preds_of(r["id"]) for r in arm],
            self.labels,
            (before[0]["id"], arm[0]["id"]),
            trained,
            noise,
        )
        versus = paired_stats(pair, self.primary)
        noise_for = None if seed_only else self.arms.noise_for
        groups = groups_of(before[0], self.task)
        versus["guardrails"] = [
            judge_forgetting(g, self.store, before, arm, trained, noise_for)
            if g.on
            else judge(g, pair, groups, self.unscored)
            for g in self.guardrails
        ]
        versus["verdict"], versus["reasons"] = verdict(
            versus, self.hypothesis, self.accept_unresolved, seed_only, (arm[0]["id"], len(arm))
        )
        versus["warnings"] = pair_warnings(before[0], arm[0], versus)
        if noise:
            versus["noise"] = [name for name, _ in noise]
        return versus

    def arm_paired(self, before: dict, run: dict) -> dict:
        return self.paired(self.arms.of(before["id"]), self.arms.of(run["id"]))


def row_of(run: dict, p: Pairing, reference: dict, version: str, same_eval: SameEval) -> dict:
    """One run's row: its metrics, its seeds, and for a variant that leads its arm the verdict
    against the reference (`vs_reference`) and its parent (`vs_parent`); another seed of an
    arm is set beside the arm's first (`vs_first`)."""
    row = _row(run, p.task)
    if run["data_version"] != version:
        row["data_note"] = (
            f"on data version {run['data_version']}, whose validation split is identical "
            f"to {version}'s (sha256 {same_eval.digest[:12]}): paired as on one version"
        )
    arm = p.arms.of(run["id"])
    if len(arm) > 1:
        row["seeds"] = _seeds(arm, p.primary)
    lead = arm[0]["id"]
    if run["id"] in p.arms.repeats:  # its seed is in an arm already: judged alone
        row["repeat_of"] = p.arms.repeats[run["id"]]
    if run["id"] != lead:  # another seed of an arm: judged with it, set beside its first
        row["arm"] = lead
        row["vs_first"] = {"run": lead, **p.paired([arm[0]], [run], seed_only=lead)}
    elif run["kind"] == "variant" and lead != p.arms.reference_lead:
        vs = p.paired(p.arms.of(reference["id"]), arm)
        row["vs_reference"] = {k: vs.pop(k) for k in VERSUS_KEYS if k in vs}
        row["against"] = reference["id"]
        row.update(vs)  # guardrails, verdict, reasons, warnings, noise
        row["warnings"] = vs["warnings"] + collapse_warnings(arm, p.preds_of, p.labels)
        row["parent"], row["reason"] = run.get("parent"), run.get("reason")
        _add_parent(row, run, p.by_id, p.store, version, p.arm_paired)
    return row


def groups_of(record: dict, task) -> list[str]:
    """The classes (or fields) of a per-group guardrail, as the reference's metrics list them."""
    return list(record["metrics"].get(task.group_key) or []) if task.group_key else []


def unscored_groups(store, record: dict, task) -> dict[str, str]:
    """The groups of a per-group guardrail the reference has no score for, each with why: an
    `every_source` or `every_class` guardrail leaves them not checked. A source of its data
    version without rows in the evaluated split (task pretrain), or a class without an example
    there (its F1 reads 0 whatever the model does: no drop could show)."""
    if task.group_scope == "every_class":
        split = record["spec"]["evaluation"]["split"]
        return {
            label: f"{label}: no {split} example in data version {record['data_version'][:8]}"
            for label, scores in (record["metrics"].get(task.group_key) or {}).items()
            if scores.get("support") == 0
        }
    if task.group_scope != "every_source":
        return {}
    version = record["data_version"]
    sources = store.data_manifest(version).get("sources") or []
    scored = set(groups_of(record, task))
    split = record["spec"]["evaluation"]["split"]
    return {
        s["name"]: f"{s['name']}: no {split} rows in data version {version[:8]}"
        for s in sources
        if s.get("name") and s["name"] not in scored
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


def _seeds(arm: list[dict], metric: str) -> list[dict]:
    """An arm's seeds: each run, its seed and its value of the metric."""
    return [{"run": r["id"], "seed": seed_of(r), metric: r["metrics"].get(metric)} for r in arm]


def _predictions(store, run_id: str, record: dict | None = None) -> dict[str, dict]:
    """The run's predictions by id, refused unless they are the file its record (`record`,
    else read from the store) hashed."""
    path = store.run_dir(run_id) / PREDICTIONS
    if not path.is_file():
        raise StoreError(
            f"{path} is missing: run {run_id}'s predictions are what compare pairs; restore "
            f"them, or `tunelab invalidate {run_id} --why ...` to leave the run out"
        )
    rows, digest = read_jsonl_hashed(path)
    recorded = (record or store.read_record(run_id)).get("predictions_sha256")
    if recorded and digest != recorded:  # judged as the run wrote them, or not at all
        raise StoreError(
            f"{path} changed since run {run_id} wrote it: its record holds sha256 {recorded}, "
            f"the file has {digest}. Restore the file; `tunelab fsck` lists whatever else "
            "changed"
        )
    return {p["id"]: p for p in rows}


def _add_parent(row: dict, run: dict, by_id: dict, store, version: str, paired) -> None:
    """`vs_parent` when the run's parent is completed and evaluated on the same validation
    split (whatever its data version), else a warning that says why there is none."""
    parent_id = run.get("parent")
    if not parent_id:
        return
    parent = by_id.get(parent_id)
    if parent is None:
        why = why_not(store, parent_id, version)
        row["warnings"].append(f"parent {parent_id}: no paired comparison with it{why}")
        return
    vs = paired(parent, run)
    row["vs_parent"] = {
        "run": parent_id,
        **vs,
        "diff": run.get("diff"),
        "reason": run.get("reason"),
    }


def why_not(store, run_id: str, version: str) -> str:
    """Why a run is not among those compared on `version`: its status, or what differs
    between its validation split and this version's."""
    try:
        record = store.read_record(run_id)
    except StoreError:
        return " (it is not in the store)"
    if record["status"] != "completed":
        return f" (it is {record['status']})"
    theirs = record["data_version"]
    try:
        return f" ({differing_text(theirs, version, split_changes(store, theirs, version))})"
    except (StoreError, OSError):
        return f" (it is on data version {theirs}, whose validation cannot be read)"
