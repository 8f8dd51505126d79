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
from tunelab.core.lab import Lab
from tunelab.core.layout import COMPARISONS, PREDICTIONS
from tunelab.core.ledger import effective_status
from tunelab.core.store import StoreError, now
from tunelab.data.same_eval import SameEval
from tunelab.stages.compare.changes import verdict_changes
from tunelab.stages.compare.frozen import (
    frozen_rules,
    rule_differences,
    spec_rules_note,
)
from tunelab.stages.compare.guardrails import GUARDRAIL_RULE
from tunelab.stages.compare.notes import multiplicity, untrained_reference
from tunelab.stages.compare.rows import Pairing, row_of, unscored_groups, why_not
from tunelab.stages.compare.rules import VERDICT_RULE
from tunelab.stages.compare.seeds import Arms
from tunelab.stages.compare.stats import RESAMPLES
from tunelab.stages.compare.two_level import SEED_RULE
from tunelab.tasks import get_task


def compare(
    lab: Lab,
    against: str | None = None,
    reason: str | None = None,
    accept_unresolved: str | None = None,
) -> dict:
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
        _refuse_without_baseline(store, runs, version)
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
    arms = Arms(store, runs, reference, same_eval)
    pairing = Pairing(
        store=store,
        task=task,
        labels=labels,
        primary=primary,
        hypothesis=hypothesis,
        guardrails=guardrails,
        accept_unresolved=accept_unresolved,
        arms=arms,
        by_id={r["id"]: r for r in runs},
        unscored=unscored_groups(store, reference, task),
    )
    rows = [row_of(run, pairing, reference, version, same_eval) for run in runs]
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
        "noise_elsewhere": arms.elsewhere,
        "differing": differing,
        "reason": reason.strip() if reason and reason.strip() else None,
        "accepted_unresolved": accept_unresolved,
    }
    earlier = (store.load(path) for path in reversed(store.numbered(COMPARISONS)))
    result["verdicts_changed"] = verdict_changes(earlier, result, rules)
    return write_comparison(store, result, rules, [reference, *variants])


def _refuse_without_baseline(store, runs: list[dict], version: str) -> None:
    """No completed baseline on the current version's validation split: say so, and where the
    lab's other runs were evaluated."""
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


def _reference(runs: list[dict], baselines: list[dict], against, version: str, task, store) -> dict:
    if against:
        matches = [r for r in runs if r["id"] == against]
        if not matches:
            raise StoreError(
                f"--against {against!r}: no completed run with that id whose validation is "
                f"data version {version}'s{why_not(store, against, version)}; compared here: "
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
