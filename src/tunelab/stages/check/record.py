"""The record of `tunelab check`: where a check is kept, the latest one, and what `run` says.

A check is keyed by the data version and a hash of the spec's wiring (`wiring`: what decides
which code runs), and is stale on another platform (device type, core package versions). When
no check has this key, `run` names what changed since the newest check of the data version,
from the `wiring` that check recorded.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import torch

from tunelab.core.digest import sha256_json
from tunelab.core.env import PLATFORM_PACKAGES, device_of
from tunelab.core.files import DamagedFile, read_json
from tunelab.core.lab import Lab
from tunelab.core.layout import CHECKS
from tunelab.core.spec import Spec
from tunelab.core.store import Store

KEYED = ("task", "model", "method", "training")
"""The spec sections in the key, whole but for the training fields below. Left out: compass,
hypothesis, guardrails, rental, evaluation, and data (the data version id is in the key)."""

QUALITY_ONLY = {
    "lr": "a coefficient of the same optimizer step (an lr ablation needs no new check)",
    "weight_decay": "a coefficient of the same AdamW step",
    "schedule": "the lr's shape over the steps: the check trains at a constant lr anyway",
    "warmup_steps": "the same: the check trains without warmup anyway",
    "decay_fraction": "the same (wsd's decay): the check trains at a constant lr anyway",
    "budget": "how many steps: the check trains two anyway",
    "seed": "another draw through the same code",
    "replicates": "how many draws through the same code",
}
"""The training fields left out of the key, each with why it cannot change which code runs.
Every other training field is in it (packing, compile, precision, strategy, threads, the batch
sizes: the check trains the spec's microbatch and up to two accumulation steps, ...), and so is
a field added later unless it is listed here: when unsure, leave it out of this list.
tests/unit/stages/check/test_record.py holds the key and these lists to the section's fields."""

SET_OR_NOT = {
    "max_grad_norm": "whether gradients are clipped is code; by how much is quality",
    "checkpoint_every": "whether a run saves checkpoints as it goes is code; how often is not",
}
"""Training fields whose value is quality but whose presence switches code on or off: the key
holds only whether each is set."""


def item(name: str, passed: bool, detail: str, **data) -> dict:
    """One line of a check: its name, whether it passed (null where it was not checked), what
    it found, and its data."""
    outcome = None if data.get("not_checked") else bool(passed)
    return {"name": name, "passed": outcome, "detail": detail, **data}


def wiring(spec: Spec) -> dict:
    """What the check's key hashes: the `KEYED` sections (None values included), the training
    section without its `QUALITY_ONLY` fields and with `SET_OR_NOT` ones as set / not set."""
    keyed = spec.model_dump(mode="json", include=set(KEYED))
    training = keyed["training"]
    for name in QUALITY_ONLY:
        training.pop(name)
    for name in SET_OR_NOT:
        training[name] = "not set" if training[name] is None else "set"
    return keyed


def wiring_hash(spec: Spec) -> str:
    """The key of a check of `spec`: the hash of its `wiring` (a size record's `spec_hash` is
    another key: the whole spec's)."""
    return sha256_json(wiring(spec))


LR_ITEMS = {"update", "loss"}
"""The items whose answer depends on the lr, a field the key leaves out: a check that failed
only these at another lr says nothing of the run's."""
LR_FACTOR = 100
"""A run whose lr is this many times below the one its check passed at is warned: the check
proved an update at that lr, not at this one."""


def checks_dir(store: Store) -> Path:
    return store.path(CHECKS)


def check_path(store: Store, spec: Spec, data_version: str) -> Path:
    return checks_dir(store) / f"{data_version}-{wiring_hash(spec)[:12]}.json"


def latest_check(store: Store, spec: Spec, data_version: str) -> dict | None:
    """The newest check of this spec (as `wiring_hash` sees it) on this data version, or None;
    a record that no longer reads raises DamagedFile."""
    path = check_path(store, spec, data_version)
    return read_json(path) if path.exists() else None


def checks_of(store: Store, data_version: str) -> list[dict]:
    """Every check of any spec on this data version; a record that no longer reads checked
    nothing that can be shown, so it is passed over."""
    folder = checks_dir(store)
    records = []
    for path in folder.glob(f"{data_version}-*.json") if folder.is_dir() else []:
        try:
            records.append(read_json(path))
        except (OSError, DamagedFile):
            continue
    return [r for r in records if isinstance(r, dict) and r.get("data_version") == data_version]


def newest_check_of(store: Store, data_version: str) -> dict | None:
    """The newest check of any spec on this data version, or None."""
    return max(checks_of(store, data_version), key=lambda r: r.get("created") or "", default=None)


def closest_check_of(store: Store, data_version: str, spec: Spec) -> dict | None:
    """The check on this data version whose wiring differs from `spec`'s in the fewest fields
    (the newest of those; one that did not record its wiring counts as farthest), or None."""
    now = wiring(spec)

    def distance(record: dict) -> int:
        return len(wiring_changes(record["wiring"], now)) if record.get("wiring") else 1 << 30

    found = checks_of(store, data_version)
    newest_first = sorted(found, key=lambda r: r.get("created") or "", reverse=True)
    return min(newest_first, key=distance, default=None)


def platform_of(device: torch.device) -> dict:
    """What makes a check stale when it changes: the device type and the core versions."""
    out = {"device": device_of(device)["type"]}
    for name in PLATFORM_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def check_status(lab: Lab, data_version: str) -> dict:
    """For `tunelab run`: the check of this spec and data version; `warning` is None only when
    it passed on this platform."""
    try:
        check = latest_check(lab.store, lab.spec, data_version)
    except DamagedFile as err:  # a check is redone in minutes: say so, as for a missing one
        shown = Path(err.path).relative_to(lab.store.lab)
        warning = f"the record of this spec's check, {shown}, is {err.why}: run `tunelab check`"
        return {"file": None, "passed": None, "warning": f"{warning} again"}
    check = check or _but_strategy(lab, data_version)
    if check is None:
        return {"file": None, "passed": None, "warning": _unchecked(lab, data_version)}
    status = {"file": check["file"], "passed": check["passed"], "warning": None}
    here = platform_of(lab.device)
    checked_lr, lr = (check.get("training") or {}).get("lr"), lab.spec.training.lr
    if not check["passed"]:
        failed = ", ".join(check["failed"])
        status["warning"] = f"the last `tunelab check` of this spec and data FAILED ({failed})"
        if checked_lr not in (None, lr) and set(check["failed"]) <= LR_ITEMS:
            status["warning"] += (
                f" at training.lr {checked_lr:g}, and this run trains at {lr:g}: those items "
                "answer for the lr too (an update below the weights' resolution), so run "
                "`tunelab check` at this lr"
            )
    elif checked_lr and lr * LR_FACTOR < checked_lr:
        status["warning"] = (
            f"`tunelab check` passed at training.lr {checked_lr:g}, and this run's lr {lr:g} is "
            f"{checked_lr / lr:.3g} times smaller: an update that small can vanish below the "
            f"weights' resolution, as the check's update item would say; run `tunelab check "
            f"training.lr={lr:g}`"
        )
    elif check["platform"] != here:
        status["warning"] = (
            f"`tunelab check` passed on another platform ({check['platform']}, now {here}): "
            "a new platform means the check is redone"
        )
    return status


def _but_strategy(lab: Lab, data_version: str) -> dict | None:
    """The newest check of `data_version` when it differs from this spec in
    `training.strategy` alone: `check` runs one process, whose code is the same under either
    strategy, so running it again would check what it checked (`size --nproc N --strategy`
    measures the processes)."""
    other = newest_check_of(lab.store, data_version)
    changes = wiring_changes((other or {}).get("wiring"), wiring(lab.spec))
    if changes and all(c.startswith("training.strategy ") for c in changes):
        return other
    return None


CHANGES_SHOWN = 4


def _unchecked(lab: Lab, data_version: str) -> str:
    """Why no check covers this run: none on this data version, or the closest one checked
    other wiring (named field by field when its record keeps what it checked)."""
    head = "no `tunelab check` has run for this spec and data version"
    ask = "(minutes, on a slice) to catch wiring errors before a long run"
    other = closest_check_of(lab.store, data_version, lab.spec)
    if other is None:
        return f"{head}: run it first {ask}"
    if other.get("wiring") is None:  # a record from before checks kept their wiring
        return (
            f"{head}: the closest one on it ({other.get('file')}) was written by an earlier "
            "tunelab that did not record what it checked, so it is not known to cover this "
            f"spec. Run it again {ask}"
        )
    changes = wiring_changes(other["wiring"], wiring(lab.spec))
    what = "other wiring: " + "; ".join(changes[:CHANGES_SHOWN]) if changes else "other wiring"
    more = len(changes) - CHANGES_SHOWN
    what += f"; and {more} more" if more > 0 else ""
    return f"{head}: the closest one on it ({other.get('file')}) checked {what}. Run it again {ask}"


def wiring_changes(before: dict | None, now: dict) -> list[str]:
    """`training.packing false, now true` for each field of the wiring that differs; empty
    when `before` was not recorded."""
    if not before:
        return []
    old, new = _flat(before), _flat(now)
    return [
        f"{k} {_shown(old, k)}, now {_shown(new, k)}"
        for k in sorted(old.keys() | new.keys())
        if old.get(k, _ABSENT) != new.get(k, _ABSENT)
    ]


_ABSENT = object()


def _flat(value: dict, prefix: str = "") -> dict:
    out = {}
    for key, inner in value.items():
        if isinstance(inner, dict) and inner:
            out |= _flat(inner, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = inner
    return out


def _shown(flat: dict, key: str) -> str:
    return json.dumps(flat[key]) if key in flat else "absent"
