"""`tunelab compare`: every run beside the reference baseline, with guardrails and a verdict.

The reference is the strongest baseline on the primary metric unless `--against` names one:
a variant has to beat what the pretrained model already gives for free. Differences are
paired: both runs are scored on the same validation examples, resampled together.

The rules are frozen: the hypothesis and guardrails are those recorded with the reference
(its resolved spec), never today's `tunelab.yaml`; a variant recorded under other rules is
refused, naming the fields, unless `--reason` says why (recorded); `hypothesis.*` and
`guardrails` overrides on the command line are refused. Every comparison is written as a
record (`.tunelab/comparisons/cNNN.json`: inputs by run id and predictions hash, the rules
applied, every number shown, the verdicts) and an event.

Each variant is set beside the reference (`vs_reference`; `guardrails`, `verdict`, `reasons`
at the top of its row) and, when its record names a `parent` that is completed on the same
data version, beside that parent too (`vs_parent`). Each paired view holds the bootstrap
interval, McNemar (0/1 per-example values), per-example flips and the concentration check.

Verdicts (VERDICT_RULE): `worse` when the interval is below zero; `guardrail broken` when a
guardrail's interval is past its limit (`guardrails.py`); `improved` when the minimum effect is
met, the interval is above zero and no guardrail is unresolved (or the user accepted the
unresolved ones with a recorded reason); `guardrail unresolved` when that gain is there but an
unresolved guardrail, not accepted, stands in its way; otherwise `no evidence`. Without a
hypothesis there is no verdict (None), only the metrics. A concentrated gain, a different
platform or protocol are warnings: they say where to look before trusting a verdict, and do not
change it.
"""

from __future__ import annotations

from tunelab.core.digest import sha256_file
from tunelab.core.errors import TunelabError
from tunelab.core.files import read_jsonl_hashed
from tunelab.core.lab import Lab
from tunelab.core.layout import COMPARISONS, PREDICTIONS
from tunelab.core.ledger import effective_status
from tunelab.core.replicates import seed_of
from tunelab.core.store import StoreError, now
from tunelab.data.same_eval import SameEval, differing_text, split_changes
from tunelab.stages.compare.changes import verdict_changes
from tunelab.stages.compare.collapse import collapse_warnings
from tunelab.stages.compare.forgetting import judge_forgetting
from tunelab.stages.compare.frozen import (
    frozen_rules,
    refuse_frozen_overrides,
    rule_differences,
    spec_rules_note,
)
from tunelab.stages.compare.guardrails import GUARDRAIL_RULE, judge
from tunelab.stages.compare.notes import multiplicity, pair_warnings, untrained_reference
from tunelab.stages.compare.pairs import make_arms
from tunelab.stages.compare.rules import VERDICT_RULE, verdict
from tunelab.stages.compare.seeds import Arms
from tunelab.stages.compare.stats import RESAMPLES
from tunelab.stages.compare.two_level import SEED_RULE
from tunelab.stages.compare.versus import VERSUS_KEYS, paired_stats
from tunelab.tasks import get_task


def compare(
    lab: Lab,
    against: str | None = None,
    reason: str | None = None,
    accept_unresolved: str | None = None,
    overrides: dict | None = None,
) -> dict:
    refuse_frozen_overrides(overrides or {})
    store = lab.store
    store.require_intact_log("compare")
    version = lab.data_version
    labels = store.data_manifest(version)["labels"]
    same_eval = SameEval(store, version)  # other versions whose validation is this one
    runs = [r for r in store.runs() if r["status"] == "completed" and same_eval(r["data_version"])]
    baselines = [r for r in runs if r["kind"] == "baseline"]
    task = get_task(lab.spec.task.type)
    if against:  # a reference on another version is named as that, not as a missing baseline
        _reference(runs, baselines, against, version, task, store)
    if not baselines:
        here = {r["id"] for r in runs}  # the others were evaluated on another validation split
        earlier = [r for r in store.runs() if r["status"] == "completed" and r["id"] not in here]
        raise StoreError(
            f"no completed baseline on data version {version}, the current one: run `tunelab "
            "baseline` first."
            + (
                " compare judges the runs evaluated on the current version's validation split; "
                f"the lab's {len(earlier)} earlier runs are on another (`tunelab data` with the "
                "data section and sources that made it makes it current again)."
                if earlier
                else ""
            )
        )
    reference = _reference(runs, baselines, against, version, task, store)
    hypothesis, guardrails = frozen_rules(reference)
    primary = hypothesis.metric if hypothesis else task.default_metric
    variants = [r for r in runs if r["kind"] == "variant" and r["id"] != reference["id"]]
    differing = rule_differences(reference, variants)
    if differing and not (reason and reason.strip()):
        raise TunelabError(
            "these runs were recorded under other rules than the reference "
            f"{reference['id']}: "
            + "; ".join(f"{run} ({', '.join(fields)})" for run, fields in differing.items())
            + ". compare judges with the reference's recorded hypothesis and guardrails; pass "
            '--reason "why" to compare anyway (recorded), or re-run the variants under them.'
        )
    by_id = {r["id"]: r for r in runs}
    unscored = unscored_groups(store, reference, task)
    arms = Arms(store, runs, reference, same_eval)
    cache: dict[str, dict] = {}

    def preds_of(run_id: str) -> dict[str, dict]:
        if run_id not in cache:
            cache[run_id] = _predictions(store, run_id, by_id.get(run_id))
        return cache[run_id]

    def paired(before: list[dict], arm: list[dict], seed_only: str | None = None) -> dict:
        noise = () if seed_only else arms.noise_for(before, arm, preds_of)
        pair = make_arms(
            [preds_of(r["id"]) for r in before],
            [preds_of(r["id"]) for r in arm],
            labels,
            (before[0]["id"], arm[0]["id"]),
            (before[0]["kind"] != "baseline", arm[0]["kind"] != "baseline"),
            noise,
        )
        versus = paired_stats(pair, primary)
        trained = (before[0]["kind"] != "baseline", arm[0]["kind"] != "baseline")
        noise_for = None if seed_only else arms.noise_for
        versus["guardrails"] = [
            judge_forgetting(g, store, before, arm, trained, noise_for)
            if g.on
            else judge(g, pair, groups_of(before[0], task), unscored)
            for g in guardrails
        ]
        versus["verdict"], versus["reasons"] = verdict(
            versus, hypothesis, accept_unresolved, seed_only, (arm[0]["id"], len(arm))
        )
        versus["warnings"] = pair_warnings(before[0], arm[0], versus)
        if noise:
            versus["noise"] = [name for name, _ in noise]
        return versus

    def arm_paired(before: dict, run: dict) -> dict:
        return paired(arms.of(before["id"]), arms.of(run["id"]))

    rows = []
    for run in runs:
        row = _row(run, task)
        if run["data_version"] != version:
            row["data_note"] = (
                f"on data version {run['data_version']}, whose validation split is identical "
                f"to {version}'s (sha256 {same_eval.digest[:12]}): paired as on one version"
            )
        arm = arms.of(run["id"])
        if len(arm) > 1:
            row["seeds"] = _seeds(arm, primary)
        lead = arm[0]["id"]
        if run["id"] in arms.repeats:  # its seed is in an arm already: judged alone
            row["repeat_of"] = arms.repeats[run["id"]]
        if run["id"] != lead:  # another seed of an arm: judged with it, set beside its first
            row["arm"] = lead
            vs = paired([arm[0]], [run], seed_only=lead)
            row["vs_first"] = {"run": lead, **vs}
        elif run["kind"] == "variant" and lead != arms.reference_lead:
            vs = paired(arms.of(reference["id"]), arm)
            row["vs_reference"] = {k: vs.pop(k) for k in VERSUS_KEYS if k in vs}
            row["against"] = reference["id"]
            row.update(vs)  # guardrails, verdict, reasons, warnings, noise
            row["warnings"] = vs["warnings"] + collapse_warnings(arm, preds_of, labels)
            row["parent"], row["reason"] = run.get("parent"), run.get("reason")
            _add_parent(row, run, by_id, store, version, arm_paired)
        rows.append(row)
    result = {
        "data_version": version,
        "task": task.name,
        "metrics": sorted(task.overall_metrics),
        "primary_metric": primary,
        "min_effect": hypothesis.min_effect if hypothesis else None,
        "deltas": DELTAS,
        # `final` opens the seal on a verdict against the strongest baseline only
        "reference_rule": "--against" if against else "strongest baseline",
        "reference": reference["id"],
        "labels": labels,
        "groups": task.group_key,
        "runs": rows,
        "multiplicity": multiplicity(rows, reference["id"]),
        "reference_note": None if against else untrained_reference(reference, runs),
        "rules_note": spec_rules_note(lab.spec, reference),
        # runs that were not judged for their status, said so rather than left out in silence
        "left_out": [
            {"run": r["id"], "status": effective_status(r, store.runs_dir / r["id"])}
            for r in store.runs()
            if r["status"] != "completed" and same_eval(r["data_version"])
        ],
    }
    rules = {
        "from": reference["id"],
        "hypothesis": hypothesis.model_dump(mode="json") if hypothesis else None,
        "guardrails": [g.model_dump(mode="json", exclude_none=True) for g in guardrails],
        "verdict_rule": VERDICT_RULE,
        "guardrail_rule": GUARDRAIL_RULE,
        "bootstrap": {"resamples": RESAMPLES, "seed": 0, "level": 0.95},
        "seed_rule": SEED_RULE,
        "arms": {lead: [r["id"] for r in members] for lead, members in arms.by_lead.items()},
        "noise": arms.used_noise,
        "differing": differing,
        "reason": reason.strip() if reason and reason.strip() else None,
        "accepted_unresolved": accept_unresolved,
    }
    earlier = (store.load(path) for path in reversed(store.numbered(COMPARISONS)))
    result["verdicts_changed"] = verdict_changes(earlier, result, rules)
    return write_comparison(store, result, rules, [reference, *variants])


def _reference(runs: list[dict], baselines: list[dict], against, version: str, task, store) -> dict:
    if against:
        matches = [r for r in runs if r["id"] == against]
        if not matches:
            raise StoreError(
                f"--against {against!r}: no completed run with that id whose validation is "
                f"data version {version}'s{_why_not(store, against, version)}; compared here: "
                f"{', '.join(r['id'] for r in runs) or 'none'}"
            )
        return matches[0]
    # the strongest baseline on the primary metric its own record states; of equals, one on
    # this data version, then the newest (recorded under the rules the lab has now, where a
    # baseline was measured again after the spec changed)
    hypothesis, _ = frozen_rules(baselines[-1])
    metric = hypothesis.metric if hypothesis else task.default_metric
    sign = -1 if metric in task.lower_is_better else 1
    ranked = enumerate(baselines)  # store.runs() lists the runs oldest first
    return max(
        ranked,
        key=lambda ir: (sign * ir[1]["metrics"][metric], ir[1]["data_version"] == version, ir[0]),
    )[1]


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


def _why_not(store, run_id: str, version: str) -> str:
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


def _add_parent(row: dict, run: dict, by_id: dict, store, version: str, paired) -> None:
    """`vs_parent` when the run's parent is completed and evaluated on the same validation
    split (whatever its data version), else a warning that says why there is none."""
    parent_id = run.get("parent")
    if not parent_id:
        return
    parent = by_id.get(parent_id)
    if parent is None:
        why = _why_not(store, parent_id, version)
        row["warnings"].append(f"parent {parent_id}: no paired comparison with it{why}")
        return
    vs = paired(parent, run)
    row["vs_parent"] = {
        "run": parent_id,
        **vs,
        "diff": run.get("diff"),
        "reason": run.get("reason"),
    }


DELTAS = (
    "every delta, interval and margin is signed so that better is positive: a rate's change is "
    "after - before; a lower-is-better metric's (bits_per_byte, loss, perplexity) is its "
    "reduction, before - after"
)
"""What a comparison's numbers mean, in the record itself: a reader of the JSON alone read a
forgetting guardrail's +0.2553 (bits per byte fell by that much) the wrong way round."""


def write_comparison(store, result: dict, rules: dict, inputs: list[dict]) -> dict:
    """The comparison as a record in the store, and an event; returns the record."""
    comparison_id, path = store.reserve(COMPARISONS, "c")
    record = {
        "id": comparison_id,
        "created": now(),
        "file": str(path.relative_to(store.lab)),
        "inputs": [
            {
                "run": r["id"],
                "predictions_sha256": sha256_file(store.run_dir(r["id"]) / PREDICTIONS),
            }
            for r in inputs
        ],
        "rules": rules,
        **result,
    }
    store.save(
        path,
        record,
        "compare",
        comparison=comparison_id,
        reference=result["reference"],
        verdicts={r["id"]: r["verdict"] for r in result["runs"] if "verdict" in r},
    )
    return record
