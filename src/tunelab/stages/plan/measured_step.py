"""Whether the run a plan measures from trained the step the plan is for.

A plan times its variants at the reference run's tokens per second. That speed belongs to the
run's model, method and step: a plan whose spec (a what-if on the command line, or the spec
file edited since) builds another model (`model.*`, its tokenizer, attention, positions or
experts) or trains it another way (`method.*`) would time a 1.6B-parameter model at a 30M
one's speed, so it is refused unless `--tokens-per-second` gives the speed measured for it.
Changes that move the speed less, and that a plan may still be read across (the length, the
batch, the precision, a speed lever, the method's other settings, activation checkpointing,
the strategy), are named in a warning. Among the lab's runs the plan prefers one of the same
model (`records.reference_run`), so a refusal means none was trained.
"""

from __future__ import annotations

from tunelab.core.param_groups import change_text, diff_specs
from tunelab.stages.plan.records import PlanError

MODEL_GROUPS = ("model", "tokenizer", "attention", "positions", "experts")
"""Groups (`core.param_groups`) whose change builds another model; with `method.type`, another
way to train it (full fine-tuning against a LoRA)."""
MODEL_KEYS = ("method.type",)
STEP_GROUPS = ("length", "batch", "precision", "speed", "method")
RUNTIME_KEYS = ("training.activation_checkpointing", "training.strategy")


def step_changes(run: dict, spec: dict) -> tuple[list[str], list[str]]:
    """(what makes another model, what makes another step or setting) from `run`'s spec to
    `spec` (resolved spec dicts), each as `key old -> new`."""
    diff = diff_specs(run.get("spec") or {}, spec)
    changes = [(g, c) for g, cs in diff.items() for c in cs]

    def shown(keep) -> list[str]:
        return [change_text(c) for g, c in changes if keep(g, c)]

    def model(g: str, c: dict) -> bool:
        return g in MODEL_GROUPS or c["key"] in MODEL_KEYS

    def step(g: str, c: dict) -> bool:
        return not model(g, c) and (g in STEP_GROUPS or c["key"] in RUNTIME_KEYS)

    return shown(model), shown(step)


def same_model(spec: dict):
    """A run's test: it trained the model `spec` builds, the way it trains it."""
    return lambda run: not step_changes(run, spec)[0]


def step_distance(spec: dict):
    """A run's count of changes, from its step to the one `spec` trains, that move the speed."""
    return lambda run: len(step_changes(run, spec)[1])


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
            f"run {run['id']} trained with other settings than the plan's spec "
            f"({'; '.join(step[:4])}{' …' if len(step) > 4 else ''}): its speed is used as "
            "measured; plan from a run of these settings (`--run RUN`) for their own"
        )
    return warnings
