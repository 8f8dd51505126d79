"""Parameter groups of the spec: which group a dotted key belongs to, and the diff of two
resolved specs by group. `run` checks the one-change rule with it (`stages/run/diff.py`) and
`compare` reads from it which runs differ only in their seed (`core/replicates.py`).

The diff compares two resolved specs (as stored in run records, `Spec.to_dict()`) key by key
and sorts every change into a parameter group.

Groups (dotted spec keys; lists are compared whole):

- `task`: `task.*`; `plan`: `hypothesis.*`, `guardrails`, `compass.*`
- `data`: `data.*`, and the data version itself (key `data_version`)
- `model`: `model.*` but for the groups below it; `method`: `method.*`
- a model's parts, each its own change, as a scratch ablation takes them one at a time:
  `tokenizer` (`model.tokenizer`, `model.bpe.*`), `attention` (`model.arch.num_attention_heads`,
  `.num_key_value_heads`), `positions` (`model.arch.rope.*`), `experts` (`model.arch.moe.*`),
  and `length` (`model.max_length`, the window the model trains and is evaluated in). With
  every `model.*` key in one group, GQA, experts, a width and the evaluation window changed
  together had passed as one change
- `optimizer`: `training.optimizer`, `.lr`, `.weight_decay`, `.max_grad_norm`
- `schedule`: `training.schedule`, `.warmup_steps`; `batch`: `training.global_batch`,
  `.microbatch`; `precision`: `training.precision`, `model.dtype`
- `speed`: the levers that change how fast the same training runs (`training.threads`,
  `.compile`, `.group_by_length`, `.packing`, `model.attention`); counted, since each can move
  the numbers by float order or by dropout's draws
- `evaluation`: `evaluation.*` (the shared protocol: loudly flagged, see `diff_warnings`)
- `seed`: `training.seed`; `budget`: `training.budget.*`
- `runtime`: `rental.*`, `training.checkpoint_every`, `.activation_checkpointing`,
  `.strategy`, `.replicates`: recorded, but not counted as a change, since they do not change
  what is trained or measured.

A key no rule names falls into the group of its top-level section (a new `training.*` field
lands in `training`) and counts: an unknown change is treated as a change.
"""

from __future__ import annotations

from typing import Any

GROUPS = (
    "task",
    "plan",
    "data",
    "model",
    "tokenizer",
    "attention",
    "positions",
    "experts",
    "length",
    "method",
    "optimizer",
    "schedule",
    "batch",
    "precision",
    "speed",
    "evaluation",
    "seed",
    "budget",
    "runtime",
)
"""Parameter groups in display order (unknown sections are shown after these)."""

UNCOUNTED = frozenset({"runtime"})
"""Groups that are recorded in the diff but do not count against the one-change rule."""

_EXACT = {
    "model.dtype": "precision",
    "training.precision": "precision",
    "training.optimizer": "optimizer",
    "training.lr": "optimizer",
    "training.weight_decay": "optimizer",
    "training.max_grad_norm": "optimizer",
    "training.schedule": "schedule",
    "training.warmup_steps": "schedule",
    "training.global_batch": "batch",
    "training.microbatch": "batch",
    "training.seed": "seed",
    "training.replicates": "runtime",
    "training.checkpoint_every": "runtime",
    "training.activation_checkpointing": "runtime",
    "training.strategy": "runtime",
    # measuring the validation loss as it trains reads no random number and moves no weight
    # (which step's weights a run keeps, `training.keep`, does)
    "training.validate_every": "runtime",
    "training.overfit_patience": "runtime",
    "training.decay_fraction": "schedule",
    "training.threads": "speed",
    "training.compile": "speed",
    "training.group_by_length": "speed",
    "training.packing": "speed",
    "model.attention": "speed",
    "data_version": "data",
    "model.tokenizer": "tokenizer",
    "model.arch.num_attention_heads": "attention",
    "model.arch.num_key_value_heads": "attention",
    "model.max_length": "length",
}
_PREFIX = {
    "training.budget": "budget",
    "task": "task",
    "hypothesis": "plan",
    "guardrails": "plan",
    "compass": "plan",
    "data": "data",
    "model": "model",
    "model.bpe": "tokenizer",
    "model.arch.rope": "positions",
    "model.arch.moe": "experts",
    "method": "method",
    "evaluation": "evaluation",
    "rental": "runtime",
}


def group_of(key: str) -> str:
    """The parameter group of a dotted spec key (see the module docstring)."""
    if key in _EXACT:
        return _EXACT[key]
    parts = key.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in _PREFIX:
            return _PREFIX[prefix]
    return parts[0]


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted leaves of nested dicts; lists (and scalars) are leaves, compared whole."""
    if isinstance(value, dict) and (value or not prefix):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def normalise(spec: dict) -> dict:
    """The spec with today's defaults filled in, so a field added to tunelab after the parent
    ran does not read as a change; a spec that no longer validates is compared as stored."""
    from tunelab.core.spec import SpecError, validate_spec

    try:
        return validate_spec(spec).to_dict()
    except (SpecError, ValueError):
        return spec


def order(group: str) -> tuple[int, str]:
    return (GROUPS.index(group) if group in GROUPS else len(GROUPS), group)


def diff_specs(parent: dict, child: dict) -> dict[str, list[dict]]:
    """Changes from `parent` to `child` (resolved spec dicts), grouped by parameter group.

    Each change is `{"key": "training.lr", "parent": 0.001, "child": 0.0005}`; a key missing
    on one side reads as None there. Only groups with changes appear, in `GROUPS` order;
    nothing changed gives `{}`.
    """
    a, b = flatten(normalise(parent)), flatten(normalise(child))
    grouped: dict[str, list[dict]] = {}
    for key in sorted(set(a) | set(b)):
        before, after = a.get(key), b.get(key)
        if before != after:  # 1 and 1.0 from YAML are the same setting
            grouped.setdefault(group_of(key), []).append(
                {"key": key, "parent": before, "child": after}
            )
    return {g: grouped[g] for g in sorted(grouped, key=order)}


NO_CHANGE = "no change (a repeat)"
"""What a diff with no change says."""

SHOWN = 60
"""The characters of a changed value shown (a long list is cut with `...`)."""


def change_text(change: dict) -> str:
    """`training.lr 0.001 -> 0.0005`, `method.type 'lora' -> 'full'`: one change as every
    command and the report say it."""
    return f"{change['key']} {_shown(change['parent'])} -> {_shown(change['child'])}"


def standing(changes: list[dict]) -> list[dict]:
    """The changes to name: a changed `type` (lora -> full) stands for the settings that come
    with it."""
    return [c for c in changes if c["key"].endswith(".type")] or changes


def changes_text(changes: list[dict]) -> str:
    """The changes of one group (or of several, flattened), `standing` ones named."""
    shown = standing(changes)
    hidden = len(changes) - len(shown)
    text = ", ".join(change_text(c) for c in shown)
    return text + (f" (with {hidden} settings that come with it)" if hidden else "")


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."
