"""`tunelab ablate KEY=V1,V2,...`: one variant per value of one parameter, same parent.

Every variant differs from the parent in that one key alone, so the one-change rule holds by
construction; the summary sets the values side by side on the primary metric.

A data key (`data.cleaning`, `data.dedup.*`, `data.sources`...) builds a data version per value
first, each with validation and test pinned to the current version (`data.eval_from`, unless
the spec pins them already), so every variant is evaluated on the same examples and pairs with
the same parent. The store's current version is never changed: each variant is handed its own
version (`Lab.data`), so a `tunelab run` started meanwhile trains on the current one. Values
are YAML, separated by commas outside brackets: `data.cleaning=[],[{rule: whitespace}]`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from tunelab.core.env import pick_device
from tunelab.core.errors import Interrupted, TunelabError
from tunelab.core.lab import Check, Lab, open_records_lab
from tunelab.core.overrides import apply_overrides, parse_value
from tunelab.core.param_groups import diff_specs
from tunelab.core.replicates import replicate_seeds, seed_of
from tunelab.data import build_data
from tunelab.stages.run.diff import (
    OneChangeError,
    counted_groups,
    format_change,
    recorded_arch,
    resolve_parent,
)
from tunelab.tasks import get_task


def split_values(raw: str) -> list[str]:
    """Split at the commas outside brackets and braces: `[a, b],[c]` -> `[a, b]`, `[c]`."""
    parts, depth, current = [], 0, ""
    for char in raw:
        depth += char in "[{"
        depth -= char in "]}"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [p for p in [*parts, current] if p.strip()]


def parse_assignment(text: str) -> tuple[str, list]:
    """`training.lr=1e-4,5e-4` -> ("training.lr", [0.0001, 0.0005]); values are read as YAML."""
    key, sep, raw = text.partition("=")
    values = [parse_value(v) for v in split_values(raw)]
    if not sep or not key.strip() or len(values) < 1:
        raise TunelabError(f"ablate {text!r}: expected KEY=V1,V2,... e.g. training.lr=1e-4,5e-4")
    return key.strip(), values


def _refused_with(key: str, value, lab, checks: Sequence[Check]) -> None:
    """`checks` on one value's lab; a refusal starts with the value it refused, since the field
    it names may be another (`model.path=small` is refused for `model.max_length`, which the
    small model's positions cannot hold)."""
    try:
        for check in checks:
            check(lab)
    except TunelabError as err:
        err.args = (f"{key}={value}: {err}", *err.args[1:])
        raise


def run_name(key: str, value) -> str:
    """The variant's run name, `lr-0.0001`: the key's last part and the value, in the
    characters a run name allows (`tunelab.core.run_names.check_run_name`); a list or mapping by
    its values (`nope_layers-1-3`, `cleaning-lowercase`, `cleaning-none`), where its brackets
    had read `cleaning-___rule____lowercase___`."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{key.rsplit('.', 1)[-1]}-{_slug(value)}")
    name = re.sub(r"\.{2,}", ".", name).lstrip(".-") or "value"
    return name[:64]


def _slug(value) -> str:
    """A value as a name: a list's or a mapping's values joined by `-`, an empty one `none`."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return "-".join(_slug(v) for v in value) or "none"
    return str(value)


def run_ablation(
    lab_path: Path,
    assignment: str,
    parent: str | None = None,
    console: Console | None = None,
    device: str | None = None,
    seeds: int | None = None,
    prepare: Callable[[Lab], object] | None = None,
    checks: Sequence[Check] = (),
) -> dict:
    """Run one variant per value (see the module docstring); `prepare` is called with each
    value's lab, its data version set, right before its run (`ablate --check` and the demos
    check each new wiring there), and what it returns is kept in the value's row (`check`).
    `checks` are the refusals `run` makes before a model loads, made on every value's lab."""
    key, values = parse_assignment(assignment)
    data_key = key.startswith("data.")
    current = open_records_lab(lab_path).data_version  # read once, never changed here
    pinned = _pinned(lab_path, current) if data_key else {}
    # every value's spec is checked, and its one change, before the first trains and before
    # torch is imported (to pick the device): a bad last value is refused at once
    labs = [open_records_lab(lab_path, {key: value} | pinned) for value in values]
    for value, lab in zip(values, labs, strict=True):
        lab.data = current
        _refused_with(key, value, lab, checks)
    _only(key, values, labs, parent, current, seeds)
    if data_key:  # each value's own version, built and checked like the rest before any trains
        for value, lab in zip(values, labs, strict=True):
            lab.data = build_data(lab.spec, lab.path, lab.store, current=False)["version"]
            if console:
                console.print(f"{key}={value}: data version {lab.data}")
            _refused_with(key, value, lab, checks)
    from tunelab.stages.run.replicates import refuse_begun, run_replicates, trained_already
    from tunelab.stages.run.variant import run_variant

    for lab in labs:  # a value an interrupted run began waits for its resume, not a second run
        planned = replicate_seeds(lab.spec.training.seed, seeds or lab.spec.training.replicates)
        refuse_begun(lab, planned, trained_already(lab, planned))

    chosen = pick_device(device)
    for lab in labs:
        lab.device = chosen
    rows = []
    for i, (value, lab) in enumerate(zip(values, labs, strict=True)):
        prepared = prepare(lab) if prepare is not None else None
        n = seeds or lab.spec.training.replicates
        with _one_key(key), _stopped_at(key, values, i, seeds):
            if n > 1:
                group = run_replicates(lab, n, run_name(key, value), console, parent=parent)
                rows.append(_row(lab, value, group["runs"][0], group))
            elif done := trained_already(lab, [lab.spec.training.seed]):
                # trained by an earlier ablate (a stopped one, resumed, as its refusal said):
                # counted, not trained again as a repeat compare would judge alone
                record = lab.store.read_record(next(iter(done.values())))
                if console:
                    console.print(f"{key}={value}: trained already by {record['id']}, counted")
                rows.append(_row(lab, value, record) | {"counted": True})
            else:
                record = run_variant(lab, run_name(key, value), console, parent=parent)
                rows.append(_row(lab, value, record))
        if isinstance(prepared, dict):
            rows[-1]["check"] = {k: v for k, v in prepared.items() if k != "result"}
    return {"key": key, "values": values, "runs": rows, "data_version": current}


def _only(
    key: str, values: list, labs: list[Lab], parent: str | None, current: str, seeds: int | None
) -> None:
    """Refuse, before anything trains, an ablation whose specs differ from the parent in more
    than `key` (an edit left in tunelab.yaml rode along: a run named for `num_experts` changed
    `num_key_value_heads` too). `data.eval_from`, which ablate pins itself, is not counted."""
    found = resolve_parent(labs[0].store, current, parent)
    if found is None:
        return
    for value, lab in zip(values, labs, strict=True):
        # the parent's spec with the key set: what follows from the change (full fine-tuning
        # takes no LoRA rank) is in it too, so only what the change does not explain remains
        expected = apply_overrides(found.get("spec") or {}, {key: value})
        diff = diff_specs(expected, lab.spec.to_dict())
        extra = [
            c for group in counted_groups(diff) for c in diff[group] if c["key"] != "data.eval_from"
        ]
        if extra:
            raise OneChangeError(
                f"ablate changes {key} alone, but the spec also differs from {found['id']} in "
                f"{'; '.join(format_change(c) for c in extra)}: make tunelab.yaml match the "
                "parent in everything else (or name another --parent), then ablate again. "
                "Nothing was trained."
            )
        # a trained parent repeated: on its own data version, and one seed (`--seeds N`
        # counts the parent's seed and trains the others)
        repeated = _trained(found) and found.get("data_version") == current
        repeated = repeated and (seeds or lab.spec.training.replicates) == 1
        diff = diff_specs(found.get("spec") or {}, expected)
        if why := _no_change(key, found, lab, diff, repeated):
            copy = f"a copy of {found['id']}" if repeated else "the spec as it is"
            raise OneChangeError(
                f"ablate {key}={_shown(value)}: {why}, so its run would train {copy}; leave "
                "the value out. Nothing was trained."
            )


def _no_change(key: str, parent: dict, lab: Lab, diff: dict, repeated: bool) -> str | None:
    """Why a value changes nothing the run trains (`repeated`: a trained parent's own value,
    on its data and one seed; an experts key on a model with none), or None. Such a value had
    trained a copy of the parent in silence, and an ablation of `moe.experts_per_token` that
    forgot `num_experts` read "k does not matter". A baseline's own value is the control: its
    variant trains it."""
    if repeated and not any(diff[group] for group in counted_groups(diff)):
        return f"{key} is {parent['id']}'s own value"
    arch = lab.spec.model.arch
    experts = key.startswith("model.arch.moe.") and key != "model.arch.moe.num_experts"
    if experts and arch and not arch.moe.num_experts:
        return (
            "the model has no experts (model.arch.moe.num_experts is 0; to ablate this key, "
            "train one with experts first, `tunelab ablate model.arch.moe.num_experts=4`, set "
            "that in tunelab.yaml and ablate with --parent that run)"
        )
    if repeated and key.startswith("model.arch.") and _same_model(parent.get("spec") or {}, arch):
        return f"it builds {parent['id']}'s own model (the same config, written another way)"
    return None


def _shown(value) -> str:
    """A value as the command line writes it (YAML's `null`, `[]`, `{rule: lowercase}`)."""
    return value if isinstance(value, str) else json.dumps(value)


def _trained(parent: dict) -> bool:
    """A variant, whose run a value equal to it would repeat (a baseline only evaluated)."""
    return parent.get("kind") == "variant"


def _same_model(parent_spec: dict, arch) -> bool:
    """Whether a scratch architecture builds the config the parent's built (a key left to its
    default in one and written in the other: `num_key_value_heads` unset is the heads')."""
    from tunelab.modeling.scratch import scratch_config

    theirs = recorded_arch(parent_spec)  # None: pretrained, or a spec no longer valid
    if arch is None or theirs is None:
        return False
    built = [scratch_config(a, 256, 64, {}).to_dict() for a in (theirs, arch)]
    return built[0] == built[1]


@contextmanager
def _stopped_at(key: str, values: list, i: int, seeds: int | None):
    """A stop in value `i`: its run's outcome, and the values left to train (run again whole,
    ablate had trained the finished values a second time beside the one waiting)."""
    try:
        yield
    except Interrupted as err:
        rest = [str(v) for v in values[i + 1 :]]
        more = f" --seeds {seeds}" if seeds else ""
        left = (
            f" `tunelab ablate {key}={','.join(rest)}{more}` trains the values not begun."
            if rest
            else ""
        )
        raise Interrupted(
            err.cause,
            f"{err.outcome} ablate stopped at {key}={values[i]} ({i + 1} of {len(values)}); "
            f"the values before it are trained.{left}",
            err.run,
            err.resumable,
        ) from err


@contextmanager
def _one_key(key: str):
    """A variant refused for changing more groups than `key`'s: ablate takes no --reason, so
    the advice is to make the spec match the parent."""
    try:
        yield
    except OneChangeError as err:
        found = str(err).rsplit("\n", 1)[0]
        raise OneChangeError(
            f"{found}\nablate changes {key} alone: make tunelab.yaml match the parent in "
            "everything else (or name another --parent), then ablate again."
        ) from None


def _pinned(lab_path: Path, current: str) -> dict:
    """Validation and test pinned to the current version, unless the spec already pins them."""
    return {} if open_records_lab(lab_path).spec.data.eval_from else {"data.eval_from": current}


def _row(lab, value, record: dict, group: dict | None = None) -> dict:
    """One value's row: its run (or its replicate group's first run, the mean over the seeds
    as the score, and the group)."""
    spec = lab.spec
    metric = spec.hypothesis.metric if spec.hypothesis else get_task(spec.task.type).default_metric
    row = {
        "value": value,
        "id": record["id"],
        "data_version": record["data_version"],
        "parent": record.get("parent"),
        "metric": metric,
        "score": record["metrics"][metric],
        "seconds": record["training"]["seconds"],
    }
    base = record.get("base_model") or {}
    if base.get("params"):  # a model built from scratch: its size beside its score
        row["params"] = {k: base["params"][k] for k in ("total", "active")}
        row["flops_per_token"] = base.get("flops_per_token")
    if group is not None:
        row["group"] = group["id"]
        row["seeds"] = [{"run": r["id"], "seed": seed_of(r)} for r in group["runs"]]
        row["score"] = group["summary"][metric]["mean"]
        row["seconds"] = sum(r["training"]["seconds"] for r in group["runs"])
    return row
