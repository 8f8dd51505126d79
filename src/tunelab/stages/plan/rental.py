"""`tunelab plan --days 3|7|30 [--run RUN]`: the rental laid out in phases, written as a record.

The plan reads only records (`records.py`: the reference run, the check and size records,
exports), turns them into durations that each name their record and field (`figures.py`), and
cuts the rental into initial checks, experiments, evaluation, a recovery buffer and export with
verification (`layout.py`, where the buffer rule is). Days, device and price default to the
spec's `rental` section (its own defaults when the spec has none).

A plan for another device than the one measured is refused: tunelab does not guess another
device's speed. A throughput measured there (`--tokens-per-second`) is accepted and recorded.
The plan is written atomically to `.tunelab/plans/pNNN.json`, with a `plan` event.
"""

from __future__ import annotations

from pathlib import Path

from tunelab.core.lab import Lab
from tunelab.core.layout import PLANS
from tunelab.core.sections import RentalSpec
from tunelab.core.store import Store, now
from tunelab.stages.plan.figures import figures
from tunelab.stages.plan.layout import layout
from tunelab.stages.plan.measured_step import require_measured_step, same_model, step_distance
from tunelab.stages.plan.records import (
    PlanError,
    finished_exports,
    latest_size,
    newest_check_on,
    reference_run,
    same_device,
)

DAYS = (3, 7, 30)


NOISE_SEEDS = 3
"""Seeds of the noise floor a plan reserves room for, the measured run's own included."""


def run_plan(
    lab: Lab,
    days: int | None = None,
    price_per_hour: float | None = None,
    device: str | None = None,
    tokens_per_second: float | None = None,
    run_id: str | None = None,
) -> dict:
    """Lay a rental out in phases from the lab's records (from `run_id`'s speed when given,
    else the reference run's: records.py); write the plan and return it."""
    rental, store = lab.spec.rental or RentalSpec(), lab.store
    days = rental.days if days is None else days
    price = rental.price_per_hour if price_per_hour is None else price_per_hour
    target = device or rental.device
    _check_inputs(days, price, tokens_per_second)
    version = lab.data_version
    counts = {split: c["n"] for split, c in store.data_manifest(version)["counts"].items()}
    planned = lab.spec.to_dict()
    run = reference_run(
        store.runs(),
        target,
        version,
        lab.spec.method.type,
        run_id,
        same_model(planned),
        step_distance(planned),
    )
    measured = run["env"]["device"]
    if tokens_per_second is None and not same_device(target, measured):
        raise PlanError(
            f"the plan is for device {target!r}, but the lab measured on {measured['type']} "
            f"({measured.get('name')}, run {run['id']}); tunelab does not guess another "
            f"device's speed. Run `tunelab check` and one `tunelab run` on {target}, or give "
            f"the throughput measured there: `tunelab plan --device {target} "
            "--tokens-per-second T`."
        )
    # a run named with no what-if is planned as it trained (the demos' handed-over run)
    named_as_is = run_id is not None and not lab.overrides
    speed_warnings = [] if named_as_is else require_measured_step(run, planned, tokens_per_second)
    check = newest_check_on(store, measured["type"])
    size = latest_size(store, measured["type"])
    fig = figures(run, check, finished_exports(store), counts, lab.spec.training, tokens_per_second)
    seeds = lab.spec.training.replicates
    noise_runs = 0 if seeds > 1 or store.noise_records() else NOISE_SEEDS - 1
    plan = layout(days, fig, counts, seeds, noise_runs)
    plan_id, path = new_plan(store)
    record = {
        "id": plan_id,
        "created": now(),
        "days": days,
        "hours_total": plan["hours_total"],
        "device": target,
        "measured_on": measured["type"],
        "price_per_hour": price,
        "cost": None if price is None else round(plan["hours_total"] * price, 2),
        "phases": plan["phases"],
        "variants": plan["variants"],
        "buffer_rule": plan["buffer_rule"],
        "throughput": fig["throughput"],
        "warnings": speed_warnings + _elsewhere(target, run) + fig["warnings"] + plan["warnings"],
        "based_on": _based_on(run, check, size, version, counts, fig, named=run_id is not None),
        # a what-if (`plan training.budget.steps=...`) says so wherever the plan is shown
        "overrides": {k: lab.overrides[k] for k in sorted(lab.overrides)},
        "file": str(path.relative_to(store.lab)),
    }
    store.save(
        path,
        record,
        "plan",
        plan=plan_id,
        file=record["file"],
        days=days,
        device=target,
        measured_on=record["measured_on"],
        tokens_per_s=fig["throughput"]["tokens_per_s"],
        throughput_source=fig["throughput"]["source"],
        variants_fit=plan["variants"]["fit"],
        cost=record["cost"],
        warnings=len(record["warnings"]),
    )
    return record


def _elsewhere(target: str, run: dict) -> list[str]:
    """What a plan for another device than the one measured takes from the measured one: all
    but the training speed given for it."""
    measured = run["env"]["device"]
    if same_device(target, measured):
        return []
    peak = (run.get("training") or {}).get("peak_memory_mb")
    held = f"the run's peak ({peak:,.0f} MiB on {measured['type']})" if peak else "this lab"
    return [
        f"memory on {target} is not measured: {held} says nothing of whether the model fits "
        f"there; `tunelab size` on that machine measures it before the rental is spent",
        f"the start-up, evaluation, final and export times are {measured['type']}'s, measured "
        f"here: only the training speed is {target}'s (--tokens-per-second)",
    ]


def new_plan(store: Store) -> tuple[str, Path]:
    """Reserve the next plan id (`p003`) and its record's path."""
    return store.reserve(PLANS, "p")


def _check_inputs(days: int, price: float | None, tokens_per_second: float | None) -> None:
    if days not in DAYS:
        raise PlanError(f"--days {days}: a rental is 3, 7 or 30 days")
    if price is not None and price < 0:
        raise PlanError(f"--price-per-hour {price}: a price cannot be negative")
    if tokens_per_second is not None and tokens_per_second <= 0:
        raise PlanError(
            f"--tokens-per-second {tokens_per_second}: give the positive rate measured there"
        )


def _based_on(run, check, size, version: str, counts: dict, fig: dict, named: bool) -> dict:
    """Which records the plan stands on, the fields read from each, and every figure."""
    t = run["training"]
    return {
        "run": {
            "id": run["id"],
            "chosen": "named (--run)"
            if named
            else "the best-ranked completed variant (records.reference_run: device, model, "
            "the spec's step, data version, method, never resumed, then the newest)",
            "device": run["env"]["device"],
            "data_version": run.get("data_version"),
            "method": (run.get("spec") or {}).get("method", {}).get("type"),
            "fields": {
                k: t.get(k)
                for k in ("steps", "seconds", "tokens", "unit", "tokens_per_s", "global_batch")
            }
            | {"created": run.get("created"), "ended": run.get("ended")},
        },
        "check": None
        if check is None
        else {
            "file": check["file"],
            "passed": check.get("passed"),
            "seconds": check.get("seconds"),
        },
        "size": None
        if size is None
        else {
            "file": size["file"],
            "step_s": (size.get("measured") or {}).get("step_s"),
            "tokens_per_s": (size.get("measured") or {}).get("tokens_per_s"),
            "microbatch": size.get("microbatch"),
            "what_if": size.get("what_if"),
            "used": "shown beside the run's throughput, not used: one probe step at one length, "
            "where the run timed its whole budget",
        },
        "data": {"version": version, "counts": counts, "field": "manifest.json counts.<split>.n"},
        "budget": {"steps": fig["steps"], "source": fig["steps_source"]},
        "figures": {
            k: {"seconds": round(v, 3), "source": fig["sources"][k]}
            for k, v in fig["seconds"].items()
        },
    }
