"""Whether the run a plan measures from trained the step the plan is for.

A plan times its variants at the reference run's tokens per second. That speed belongs to the
run's model, method and step: a plan whose spec (a what-if on the command line, or the spec
file edited since) builds another model (`model.*`, its tokenizer, attention, positions or
experts) or trains it another way (`method.*`) would time a 1.6B-parameter model at a 30M
one's speed, so it is refused unless `--tokens-per-second` gives the speed measured for it.
Changes that move the speed less, and that a plan may still be read across (the length, the
batch, the precision, a speed lever, activation checkpointing, the strategy), are named in a
warning.
"""

from __future__ import annotations

from tunelab.core.param_groups import diff_specs
from tunelab.stages.plan.records import PlanError

OTHER_MODEL = ("model", "tokenizer", "attention", "positions", "experts", "method")
"""Groups (`core.param_groups`) whose change makes another model or another way to train it."""
OTHER_STEP = ("length", "batch", "precision", "speed")
RUNTIME_KEYS = ("training.activation_checkpointing", "training.strategy")


def step_changes(run: dict, spec: dict) -> tuple[list[str], list[str]]:
    """(keys that make another model, keys that make another step) from `run`'s spec to
    `spec` (resolved spec dicts), each as `key old -> new`."""
    diff = diff_specs(run.get("spec") or {}, spec)

    def shown(groups) -> list[str]:
        return [
            f"{c['key']} {c['parent']!r} -> {c['child']!r}"
            for g in groups
            for c in diff.get(g, [])
            if g != "runtime" or c["key"] in RUNTIME_KEYS
        ]

    return shown(OTHER_MODEL), shown((*OTHER_STEP, "runtime"))


def require_measured_step(run: dict, spec: dict, tokens_per_second: float | None) -> list[str]:
    """Refuse a plan for another model than `run` measured (unless its speed is given); the
    warnings for another step of the same model."""
    model, step = step_changes(run, spec)
    if model and tokens_per_second is None:
        raise PlanError(
            f"the plan's spec builds or trains another model than run {run['id']} measured "
            f"({'; '.join(model[:4])}{' …' if len(model) > 4 else ''}), so that run's speed "
            "is not this model's, and tunelab does not guess how speed scales. Train it small "
            "first (`tunelab run` with these settings and a small training.budget) and plan "
            "from that run (`--run RUN`), or give the speed measured for it "
            "(`--tokens-per-second T`)."
        )
    warnings = []
    if model:
        warnings.append(
            f"another model than run {run['id']} trained ({'; '.join(model[:4])}): "
            "its variants are timed at the --tokens-per-second given, its overhead is "
            f"run {run['id']}'s, and its memory was not sized (`tunelab size`)"
        )
    if step:
        warnings.append(
            f"run {run['id']} trained another step than the plan's spec ({'; '.join(step[:4])}"
            f"{' …' if len(step) > 4 else ''}): its speed is used as measured; plan from a "
            "run of this step (`--run RUN`) for its own"
        )
    return warnings
