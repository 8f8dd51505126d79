"""`tunelab noise [RUN] --seeds N`: the noise floor of a run, measured once.

Trains the seeds of `core.replicates.replicate_seeds(RUN's seed, N)` that RUN's arm does not
have yet, each under RUN's own recorded spec, data version, parent and reason (RUN itself is
the first seed), as one replicate group; then writes `.tunelab/noise/nNNN.json`: the runs, their
seeds, the family the floor applies to (`core.replicates.family`), and the seed-to-seed spread
of every overall metric, of every per-group metric (per class, per field, per source) and of
what a forgetting guardrail measures on its text (`forgetting`).
`compare` pools the spread of a family's noise records into the seed-aware interval of every
arm of that family (`stages/compare/seeds.py`). RUN defaults to the newest completed variant.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from rich.console import Console

from tunelab.core.env import pick_device
from tunelab.core.errors import TunelabError
from tunelab.core.lab import Check, recorded_lab
from tunelab.core.layout import NOISE
from tunelab.core.ledger import described
from tunelab.core.replicates import (
    COUNTS,
    FAMILY_KEYS,
    family,
    replicate_seeds,
    seed_of,
)
from tunelab.core.sections import FORGETTING_METRICS
from tunelab.core.store import Store, StoreError, now
from tunelab.tasks import get_task

FAMILY_RULE = (
    "applies to the arms with the same data version, evaluation protocol and "
    + ", ".join(FAMILY_KEYS)
    + ": what the seed draws over and what is measured; a one-change variant within the family "
    "is taken to share the spread (the pooled t's equal-variance assumption)"
)


def measure_noise(
    lab_path: Path,
    run_id: str | None = None,
    seeds: int = 3,
    console: Console | None = None,
    device: str | None = None,
    checks: Sequence[Check] = (),
) -> dict:
    """Measure the noise floor of `run_id` (see the module docstring). `checks` are the
    refusals `run` makes before a model loads, made on the run's recorded spec before any
    group is opened or torch is imported (as `resume` makes them)."""
    if seeds < 2:
        raise TunelabError(f"--seeds {seeds}: a spread needs at least 2 seeds (3 or more advised)")
    store = Store(lab_path)
    record = _chosen(store, run_id)
    lab = recorded_lab(store, record, checks)  # the seeds train on the run's own data
    from tunelab.stages.run.replicates import (
        open_group,
        refuse_begun,
        train_seeds,
        trained_already,
    )

    lab.device = pick_device(device)
    wanted = replicate_seeds(seed_of(record), seeds)
    # the seeds its arm has already (whatever their parent), the run itself for its own
    have = trained_already(lab, wanted) | {seed_of(record): record["id"]}
    refuse_begun(lab, wanted, have)
    measured = _measured(store, [have.get(s) for s in wanted])
    if measured:  # these seeds are trained and measured already: no group, no second record
        return {**measured, "trained": 0, "unchanged": True, "warnings": tie_warnings(measured)}
    group, path = open_group(
        store, "noise", record["name"], seed_of(record), wanted, of=record["id"]
    )
    runs = train_seeds(
        lab,
        group,
        path,
        record["name"],
        console,
        have,
        allow_warnings=record.get("warnings_allowed"),
        parent=record.get("parent"),
        reason=record.get("reason"),
    )
    if len(runs) < 2:
        raise TunelabError(
            f"only {len(runs)} of the {seeds} seeds of {record['id']} completed: no spread to "
            f"record; see group {group['id']} and `tunelab runs`"
        )
    noise_id, out = store.reserve(NOISE, "n")
    result = {
        "id": noise_id,
        "created": now(),
        "file": str(out.relative_to(store.lab)),
        "of": record["id"],
        "group": group["id"],
        "runs": [r["id"] for r in runs],
        "seeds": [seed_of(r) for r in runs],
        "family": family(record),
        "family_rule": FAMILY_RULE,
        "spread": spread(runs, record["task"]),
        "sd_interval": sd_interval(len(runs) - 1),
        "trained": sum(m["trained"] for m in group["members"]),
        "seconds": sum(r["training"]["seconds"] for r in runs if r["id"] not in have.values()),
    }
    store.save(out, result, "noise", noise=noise_id, of=record["id"], runs=result["runs"])
    return result | {"warnings": tie_warnings(result)}


def tie_warnings(result: dict) -> list[str]:
    """A spread of 0 (the seeds tie on a metric) measured nothing: said, with the command that
    can measure it."""
    tied = [k for k, v in result["spread"]["overall"].items() if v.get("range") == 0]  # sd: 1e-17
    if not tied:
        return []
    return [
        f"the seeds tie on {', '.join(tied)}: a spread of 0 measured nothing of how far a new "
        "seed moves it, and compare judges such a spread as not measured; more seeds (`tunelab "
        f"noise {result['of']} --seeds {len(result['runs']) + 2}`) can measure it"
    ]


def _measured(store: Store, runs: list[str | None]) -> dict | None:
    """The noise record of exactly these runs, when every one exists: a second record of the
    same seeds would not be a second look (compare counts shared runs once)."""
    if None in runs:
        return None
    return next((n for n in store.noise_records() if set(n.get("runs", [])) == set(runs)), None)


def _chosen(store: Store, run_id: str | None) -> dict:
    if run_id is None:
        variants = [
            r for r in store.runs() if r["kind"] == "variant" and r["status"] == "completed"
        ]
        if not variants:
            raise StoreError("no completed variant to measure the noise of: `tunelab run` first")
        return variants[-1]
    record = store.read_record(run_id)
    if record["kind"] != "variant" or record["status"] != "completed":
        raise TunelabError(
            f"{run_id} is {described(record, store.run_dir(run_id))}: the noise floor is measured "
            "on a completed variant (a baseline draws no seed)"
        )
    return record


def sd_interval(df: int, level: float = 0.95) -> dict:
    """How rough an sd of `df` degrees of freedom is: the 95% interval of the true sd is the
    sample sd times these factors (chi-square; 0.45 to 31.9 for two seeds, 0.52 to 6.3 for
    three, 0.60 to 2.9 for five)."""
    from scipy.stats import chi2  # scipy.stats takes most of a second to import

    tail = (1 - level) / 2
    return {
        "df": df,
        "level": level,
        "low_factor": round(float(np.sqrt(df / chi2.ppf(1 - tail, df))), 3),
        "high_factor": round(float(np.sqrt(df / chi2.ppf(tail, df))), 3),
    }


def _stats(values: list[float]) -> dict:
    return {
        "values": values,
        "mean": float(np.mean(values)),
        "sd": float(np.std(values, ddof=1)),
        "range": float(max(values) - min(values)),
    }


def spread(runs: list[dict], task_name: str) -> dict:
    """Seed-to-seed spread of every overall metric, every per-group metric and, under
    `forgetting`, what a forgetting guardrail measures on each text every seed was scored on."""
    task = get_task(task_name)
    metrics = [r["metrics"] for r in runs]
    out = {"overall": {m: _stats([x[m] for x in metrics]) for m in sorted(task.overall_metrics)}}
    if task.group_key and task.group_key in metrics[0]:
        out[task.group_key] = {
            name: {
                m: _stats([x[task.group_key][name][m] for x in metrics])
                for m, v in values.items()
                if m not in COUNTS and isinstance(v, int | float)
            }
            for name, values in metrics[0][task.group_key].items()
        }
    scored = [
        {source: g["metrics"] for source, g in (r.get("guard") or {}).items() if "metrics" in g}
        for r in runs
    ]
    texts = sorted(set.intersection(*(set(s) for s in scored)))
    if texts:
        out["forgetting"] = {
            text: {
                m: _stats([s[text][m] for s in scored])
                for m in FORGETTING_METRICS
                if all(m in s[text] for s in scored)
            }
            for text in texts
        }
    return out
