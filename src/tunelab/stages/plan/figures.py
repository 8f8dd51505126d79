"""The durations a plan is made of, in seconds, each with the record and field it comes from.

- throughput: the reference run's `training.tokens_per_s` (tokens per second over its whole
  budget, from its unrounded seconds; `training.tokens / training.seconds` for a run without
  it), or the `--tokens-per-second` given for the target device (recorded). An image lab's run
  counts images there (`training.unit`), and the plan names its rate in images/s (the
  record's keys keep their names; `throughput.unit` says which).
- `step_s`: tokens per step at the spec's global batch (the run's `training.tokens /
  training.steps`, scaled by global batch over the run's `training.global_batch`) / throughput.
- `overhead_s`: the run's time outside its steps, `ended - process.started - training.seconds`
  (`created` for a run without its process's start: a library caller's, a resumed one)
  (loading, evaluation on validation, predictions and weights saved); `eval_row_s` is the run's
  `evaluation_seconds` over the rows it evaluated (`metrics.n`), or, for a run from before that
  was recorded, its whole overhead over them (a final counted the model's load once per row).
- `reload_s`: a checkpoint reloaded in a fresh process, the check record's `reload` item
  (`seconds`); without a check record the run's overhead stands in, with a warning.
- `check_s`: the check record's `seconds` (0, with that warning, without one).
- `variant_s`: the current budget's steps × `step_s` + `overhead_s`.
- `final_s`: the final on test, test rows × `eval_row_s` + `reload_s`.
- `export_s`, `verify_s`: the export and verify records' `seconds` when they exist; else a
  reload for the export, and a reload plus an evaluation of validation for the verification.

With a given throughput the step time follows it; the other measured durations (loading,
evaluation, check, export) are scaled by measured / given throughput only when the target is
slower, never made shorter: a faster training step says little about loading from disk, and a
plan should not be optimistic.
"""

from __future__ import annotations

import math

from tunelab.core.errors import TunelabError
from tunelab.core.sections import TrainingSpec
from tunelab.stages.plan.records import timed_item, wall_from_process, wall_seconds


def figures(
    run: dict,
    check: dict | None,
    exports: dict,
    counts: dict[str, int],
    training: TrainingSpec,
    tokens_per_second: float | None = None,
) -> dict:
    """`seconds` and `sources` per figure, the budget's `steps`, `throughput`, `warnings`."""
    t, rid, device = run["training"], run["id"], run["env"]["device"]["type"]
    unit = t.get("unit", "tokens")  # an image lab's run counts images
    # the run's own rate, from its unrounded seconds (`training.seconds` is kept to 0.01 s: a
    # run of 0.0466 s read 17,920 tokens/s where it had measured 19,215)
    measured_tps = t.get("tokens_per_s") or t["tokens"] / t["seconds"]
    tps = tokens_per_second or measured_tps
    scale = max(1.0, measured_tps / tps)
    scaled = f" × {scale:.4g} (measured / given throughput)" if scale != 1 else ""
    packed = (run.get("packing") or {}).get("sequence_length")  # task pretrain
    steps, steps_source = budget_steps(training, counts["train"], packed)
    per_step = t["tokens"] / t["steps"] * training.global_batch / t["global_batch"]
    fig: dict[str, tuple[float, str]] = {}
    warnings: list[str] = []

    batch = (
        f"at global batch {training.global_batch}"
        if t["global_batch"] == training.global_batch
        else f"at its global batch {t['global_batch']}, scaled to {training.global_batch}"
    )
    fig["step_s"] = (
        per_step / tps,
        f"{per_step:.0f} {unit} per step ({rid} training.tokens / training.steps {batch}) / "
        f"{tps:.1f} {unit}/s",
    )
    wall = wall_seconds(run)
    if wall is None:
        warnings.append(f"{rid} has no usable created/ended times: its evaluation time is unknown")
    elif run.get("resumed"):
        warnings.append(
            f"{rid} was stopped and resumed: its ended - created counts the time it sat "
            "stopped, so overhead_s may read high; `--run` a run that trained straight through"
        )
    overhead = max(0.0, (wall or t["seconds"]) - t["seconds"]) * scale
    rows = (run.get("metrics") or {}).get("n") or counts["validation"]
    began = "process.started" if wall_from_process(run) else "created"
    fig["overhead_s"] = (overhead, f"{rid} ended - {began} - training.seconds{scaled}")
    evaluated = run.get("evaluation_seconds")  # a run before it was recorded: the overhead's
    fig["eval_row_s"] = (
        (evaluated * scale / rows, f"{rid} evaluation_seconds / the {rows} rows it evaluated")
        if evaluated is not None
        else (overhead / rows, f"overhead_s / the {rows} rows {rid} evaluated (its model load too)")
    )
    reload = timed_item(check, "reload")
    if check is not None and reload is not None:
        fig["reload_s"] = (reload * scale, f"{check['file']} item reload seconds{scaled}")
        fig["check_s"] = (check.get("seconds", 0.0) * scale, f"{check['file']} seconds{scaled}")
    else:
        fig["reload_s"] = (overhead, "overhead_s (no check record with a timed reload)")
        fig["check_s"] = (0.0, f"no `tunelab check` record measured on {device}")
        warnings.append(
            f"no `tunelab check` record measured on {device}: the reload time is the run's "
            "evaluation overhead, and the initial checks are the set-up allowance only"
        )
    reload_s, row_s = fig["reload_s"][0], fig["eval_row_s"][0]
    fig["variant_s"] = (steps * fig["step_s"][0] + overhead, f"{steps} steps × step_s + overhead_s")
    cap = training.budget.seconds
    if cap is not None and steps * fig["step_s"][0] > cap:  # the cap ends it first
        fig["variant_s"] = (cap + overhead, f"training.budget.seconds {cap:g} + overhead_s")
        warnings.append(
            f"training.budget.seconds {cap:g} ends each variant before the {steps} steps of its "
            f"budget (about {cap / fig['step_s'][0]:.0f} at step_s): its schedule does not "
            "finish its decay"
        )
    test, val = counts.get("test", 0), counts["validation"]
    fig["final_s"] = (test * row_s + reload_s, f"{test} test rows × eval_row_s + reload_s")
    fig["export_s"] = _measured_or(exports["export"], scale, reload_s, "reload_s")
    fig["verify_s"] = _measured_or(
        exports["verify"], scale, reload_s + val * row_s, f"reload_s + {val} rows × eval_row_s"
    )
    given = f"given (--tokens-per-second), measured {measured_tps:.1f} on {device} ({rid})"
    return {
        "seconds": {k: v for k, (v, _) in fig.items()},
        "sources": {k: s for k, (_, s) in fig.items()},
        "steps": steps,
        "steps_source": steps_source,
        "throughput": {
            "tokens_per_s": round(tps, 1),
            "unit": unit,
            "source": given if tokens_per_second else f"{rid} training.tokens_per_s",
            "measured_tokens_per_s": round(measured_tps, 1),
            "measured_by": rid,
            "given": tokens_per_second,
            "duration_scale": round(scale, 4),
        },
        "warnings": warnings,
    }


def budget_steps(
    training: TrainingSpec, n_train: int, sequence_length: int | None = None
) -> tuple[int, str]:
    """The current budget in optimizer steps, counted as `training.loop.total_steps` does
    (a token budget over packed sequences of `sequence_length`)."""
    budget = training.budget
    if budget.steps is not None:
        return budget.steps, "training.budget.steps"
    if budget.tokens is not None and sequence_length:
        per_step = training.global_batch * sequence_length
        return max(1, math.ceil(budget.tokens / per_step)), (
            f"training.budget.tokens {budget.tokens} / (global batch {training.global_batch} "
            f"× sequence length {sequence_length})"
        )
    if budget.tokens is not None:
        raise TunelabError(
            "training.budget.tokens: the plan needs a run of task pretrain (its packed "
            "sequence length) to count steps; run one first, or give steps or epochs"
        )
    steps = max(1, math.ceil(budget.epochs * n_train / training.global_batch))
    return steps, (
        f"training.budget.epochs {budget.epochs} × {n_train} train rows / global batch "
        f"{training.global_batch}"
    )


def _measured_or(
    found: tuple[float, str] | None, scale: float, estimate: float, how: str
) -> tuple[float, str]:
    if found is None:
        return estimate, f"estimated as {how} (no record of it yet)"
    seconds, source = found
    return seconds * scale, source + (f" × {scale:.4g}" if scale != 1 else "")
