"""Variants with a parent and a diff: what one run changed against the run it descends from.

A run's parent is a baseline or an earlier run. The diff compares the two resolved specs (as
stored in run records, `Spec.to_dict()`) key by key and sorts every change into a parameter
group, so the one-change rule can be checked: changing more than one group at a time is
refused unless the user records why (`--reason`).

The groups, and which keys fall in each, are `tunelab.core.param_groups`'s.
"""

from __future__ import annotations

from tunelab.core.audit import require_as_logged
from tunelab.core.errors import TunelabError
from tunelab.core.layout import RECORD
from tunelab.core.param_groups import NO_CHANGE, UNCOUNTED, diff_specs, order
from tunelab.core.param_groups import change_text as format_change
from tunelab.core.store import Store, StoreError
from tunelab.data.same_eval import SameEval

PROTOCOL_KEYS = ("model.max_length", "model.template", "model.kind")
"""Keys outside `evaluation.*` that are part of the shared evaluation protocol too."""


class OneChangeError(TunelabError):
    """More than one parameter group changed against the parent and no reason was given."""


class ParentError(TunelabError):
    """The named parent cannot be one: unknown, or not a completed run."""


BASE_KEY = "base weights sha256"
"""The change a base's new weights make, where the spec names the same folder."""


def diff_runs(
    parent_record: dict, child_spec: dict, child_data_version: str, base: dict | None = None
) -> dict:
    """The diff of a new run against its parent's record: spec changes and the data version
    (a new data version is a change of the `data` group). With `base` (the identity of the new
    run's base, `modeling.identity`), the base too: other weights (or another config or
    tokenizer) at the same `model.path` are a change of the `model` group (it read "the same
    spec"), and the same base at another path is not (moved: recorded, uncounted)."""
    diff = diff_specs(parent_record.get("spec") or {}, child_spec)
    before = parent_record.get("data_version")
    if before != child_data_version:
        change = {"key": "data_version", "parent": before, "child": child_data_version}
        diff.setdefault("data", []).insert(0, change)
    recorded = parent_record.get("base_model") or {}
    was = recorded.get("weights_sha256")
    if base and was and (child_spec.get("model") or {}).get("init") != "scratch":
        from tunelab.modeling.identity import changed_files

        model = diff.pop("model", [])
        moved = [c for c in model if c["key"] == "model.path"]
        files = changed_files(recorded, base)  # its config or tokenizer, as its weights
        if base["weights_sha256"] != was:
            model.append(
                {"key": BASE_KEY, "parent": was[:16], "child": base["weights_sha256"][:16]}
            )
        elif files:
            model.append({"key": "base files", "parent": None, "child": files})
        elif moved:  # the same base found elsewhere: where it lies is no change
            model.remove(moved[0])
            diff.setdefault("runtime", []).append(moved[0] | {"same_base": True})
        if model:
            diff["model"] = model
    return {g: diff[g] for g in sorted(diff, key=order)}


def base_of(model, lab_path) -> dict | None:
    """The identity of a pretrained base for `diff_runs` (None for a scratch model, whose base
    is its spec): hashed once a process (`identity`), which the run records anyway."""
    if model.scratch:
        return None
    from tunelab.modeling.identity import identity

    return identity(model, lab_path)


def counted_groups(diff: dict[str, list[dict]]) -> list[str]:
    """The groups that count against the one-change rule."""
    return [g for g in diff if g not in UNCOUNTED]


def format_diff(diff: dict[str, list[dict]]) -> str:
    """One line per group: `optimizer: training.lr 0.001 -> 0.0005`."""
    if not diff:
        return NO_CHANGE
    return "\n".join(f"{g}: " + "; ".join(format_change(c) for c in cs) for g, cs in diff.items())


def check_one_change(
    diff: dict[str, list[dict]], reason: str | None, parent: str | None = None
) -> None:
    """Refuse a run that changes more than one counted group unless a reason is given.

    One group (e.g. only the optimizer) and no change at all (a repeat, such as a seed check
    with the same seed) are allowed. The caller records the reason with the run.
    """
    groups = counted_groups(diff)
    if len(groups) <= 1 or (reason and reason.strip()):
        return
    against = f" against {parent}" if parent else ""
    lines = [f"  {g}: " + "; ".join(format_change(c) for c in diff[g]) for g in groups]
    raise OneChangeError(
        f"this run changes {len(groups)} parameter groups{against} "
        f"({', '.join(groups)}):\n"
        + "\n".join(lines)
        + "\nChange one group at a time so the result says what caused it, or record why "
        'these go together with --reason "...".'
    )


def diff_warnings(diff: dict[str, list[dict]], same_validation: bool = False) -> list[str]:
    """Loud notes about changes that make the parent's numbers incomparable: the evaluation
    protocol, and the data version when its validation split changed too (`same_validation`:
    the two versions' validation splits have the same content, so the runs still pair)."""
    out = []
    protocol = list(diff.get("evaluation", [])) + [
        c for changes in diff.values() for c in changes if c["key"] in PROTOCOL_KEYS
    ]
    if protocol:
        out.append(
            "the evaluation protocol changed ("
            + "; ".join(format_change(c) for c in protocol)
            + "): its metrics are not measured the way the parent's were"
        )
    version = next((c for c in diff.get("data", []) if c["key"] == "data_version"), None)
    if version and not same_validation:
        out.append(
            f"the data version changed ({version['parent']} -> {version['child']}): "
            "validation examples differ, so there is no paired comparison with the parent"
        )
    return out


DERIVED = (
    ("kv_heads", "model.arch.num_key_value_heads", "num_attention_heads"),
    ("head_dim", None, "hidden_size / num_attention_heads"),
    ("expert_size", "model.arch.moe.expert_size", "intermediate_size / experts_per_token"),
)
"""A scratch model's widths that follow other settings where they are not set: (the `Arch`
property, the key that sets it or None, what it follows)."""


def recorded_arch(spec: dict | None):
    """A recorded spec's scratch architecture (`core.scratch.Arch`), or None: a pretrained
    model, or a spec no longer valid (diffed as stored)."""
    from tunelab.core.scratch import Arch

    raw = ((spec or {}).get("model") or {}).get("arch")
    try:
        return Arch(**raw) if raw else None
    except (TypeError, ValueError):
        return None


def derived_changes(parent_spec: dict, child_spec: dict, diff: dict) -> list[str]:
    """What changed with a scratch model's settings without being named in the diff: a width
    that follows others (`experts_per_token` 1 -> 4 also took each expert from 768 to 192
    wide, and the total parameters with it). Empty for pretrained models."""
    before, after = recorded_arch(parent_spec), recorded_arch(child_spec)
    if before is None or after is None:
        return []
    named = {c["key"] for changes in diff.values() for c in changes}
    out = []
    for name, key, follows in DERIVED:
        if name == "expert_size" and not (before.moe.num_experts and after.moe.num_experts):
            continue
        old, new = getattr(before, name), getattr(after, name)
        if old != new and key not in named:
            setting = f"`{key}` is not set, so it" if key else "it"
            out.append(
                f"{name.replace('_', ' ')} {old} -> {new}: {setting} follows {follows}; the "
                "change moves it too"
            )
    return out


def no_baseline(data_version: str) -> str:
    """What a run without a parent is told: compare needs a baseline on its validation."""
    return (
        f"no baseline is measured on data version {data_version}: `tunelab compare` judges a "
        "variant against one, so run `tunelab baseline` (this run needs no retraining)"
    )


def resolve_parent(store: Store, data_version: str, parent: str | None) -> dict | None:
    """The parent's record: the named run, or by default the newest completed baseline
    evaluated on `data_version`'s validation split (on that version, or on another whose
    validation is the same: `data.eval_from`); None when there is none yet. A named parent
    must be completed, and either must be as the log wrote it: a run is built on it (its
    spec for the one-change rule, a probe's head), as `compare` judges from it."""
    record = _parent(store, data_version, parent)
    if record is not None:  # an edited baseline had been built on without a word (hS F8)
        require_as_logged(store, store.runs_dir / record["id"] / RECORD, "`tunelab run`")
    return record


def _parent(store: Store, data_version: str, parent: str | None) -> dict | None:
    if parent is None:
        same_eval = SameEval(store, data_version)
        baselines = [
            r
            for r in store.runs()
            if r["kind"] == "baseline"
            and r["status"] == "completed"
            and same_eval(r["data_version"])
        ]
        return baselines[-1] if baselines else None
    try:
        record = store.read_record(parent)
    except StoreError as err:
        raise ParentError(f"--parent: {err}") from None
    if record["status"] != "completed":
        raise ParentError(
            f"--parent {parent}: the run is {record['status']}, not completed; "
            "a parent must be a completed baseline or run"
        )
    return record
