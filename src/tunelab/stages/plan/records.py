"""What the lab has measured, read from its records; nothing here computes a plan.

- the reference run: the one the user names (`--run`; the demos name the run they hand
  over), else the newest completed variant with a timed training (`training.steps`,
  `seconds`, `tokens`), preferring one measured on the target device, then one of the model
  the spec builds (`measured_step`), then one with the fewest settings that move the speed
  changed from the spec's (the length, the batch, the precision...: a quick what-if run of 4
  tokens had timed every variant 30 times too slow), then one on the current data version,
  then one of the spec's method, then one never stopped and resumed (its `ended - created`
  counts the time it sat stopped);
- the newest `tunelab check` and `tunelab size` records measured on the same device type as
  that run (a passed check before a failed one);
- export and verify durations, when records of them exist: `.tunelab/exports/*.json`
  (`seconds`, `verified.seconds`) and `verify` events (`seconds`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from tunelab.core.errors import TunelabError
from tunelab.core.layout import CHECKS, EXPORTS, SIZING
from tunelab.core.store import Store, read_json


class PlanError(TunelabError):
    """The plan cannot be made from what the lab has measured, or for what was asked."""


def reference_run(
    runs: list[dict],
    target: str,
    version: str,
    method: str,
    run_id: str | None = None,
    same_model=None,
    step_changes=None,
) -> dict:
    """The completed variant the plan measures from: `run_id`'s, else the best-ranked one (see
    the module docstring); `same_model` (a run's test) ranks first the runs of the model the
    plan is for, and `step_changes` (a run's count of settings that move the speed, such as
    the length and the batch) then those that trained the step the plan is for."""
    if run_id is not None:
        return named_run(runs, run_id)
    usable = [
        r
        for r in runs
        if r.get("kind") == "variant" and r.get("status") == "completed" and _timed(r)
    ]
    if not usable:
        raise PlanError(
            "no completed variant to measure from: run `tunelab check` and one `tunelab run` "
            "first (their records give the seconds per step, tokens per second and evaluation "
            "time the plan is made of)"
        )
    ranked = [
        (
            same_device(target, r["env"]["device"]),
            same_model is None or same_model(r),
            -step_changes(r) if step_changes else 0,  # a what-if of 4 tokens timed them all
            r.get("data_version") == version,
            (r.get("spec") or {}).get("method", {}).get("type") == method,
            not r.get("resumed"),  # a resumed run's wall clock holds the time it sat stopped
            i,  # runs come oldest first: the newest wins a tie
        )
        for i, r in enumerate(usable)
    ]
    return usable[max(ranked)[-1]]


def named_run(runs: list[dict], run_id: str) -> dict:
    """The run `--run` names, refused unless it is a completed variant with a timed training."""
    run = next((r for r in runs if r.get("id") == run_id), None)
    if run is None:
        known = ", ".join(r["id"] for r in runs if r.get("kind") == "variant") or "none yet"
        raise PlanError(f"--run {run_id}: no such run in this lab (its variants: {known})")
    if run.get("kind") != "variant" or run.get("status") != "completed":
        raise PlanError(
            f"--run {run_id}: a plan measures from a completed variant, and this is a "
            f"{run.get('status')} {run.get('kind')}; name a variant that `tunelab run` finished"
        )
    if not _timed(run):
        raise PlanError(
            f"--run {run_id}: its record has no timed training (training.steps, seconds, "
            "tokens), so it gives no speed to plan from; name another run"
        )
    return run


def _timed(run: dict) -> bool:
    training = run.get("training") or {}
    return all(_number(training.get(k)) and training[k] > 0 for k in ("steps", "seconds", "tokens"))


def same_device(target: str, measured: dict) -> bool:
    """`cpu`, `cuda` or `cuda:1` match the recorded device type; a model name (`H100`) matches
    whole words of the recorded device name (`NVIDIA H100 80GB HBM3`), never a part of one
    (`x86` is not `x86_64`)."""
    want = " ".join(target.strip().lower().split())
    name = " ".join(str(measured.get("name") or "").lower().split())
    return want.split(":")[0] == measured.get("type") or (bool(want) and f" {want} " in f" {name} ")


def newest_check_on(store: Store, device_type: str) -> dict | None:
    """The newest check record measured on `device_type` (`env.device.type`)."""
    return _newest(_records(store, CHECKS), lambda r: _device_type(r) == device_type)


def latest_size(store: Store, device_type: str) -> dict | None:
    """The newest size record measured on `device_type` (its `device`) at the spec's own length
    and microbatch; else the newest what-if (`--seq-len`, `--microbatch`: its `what_if`)."""
    records = [r for r in _records(store, SIZING) if r.get("device") == device_type]
    return _newest(records, lambda r: not r.get("what_if")) or _newest(records, bool)


def finished_exports(store: Store) -> dict[str, tuple[float, str] | None]:
    """Measured export and verify durations (seconds, source): the newest bundle's that was
    timed both ways (one bundle's pair: a merged GGUF export beside an adapter's verify
    planned neither), else the newest of each, or None."""
    out: dict[str, tuple[float, str] | None] = {"export": None, "verify": None}
    records = _records(store, EXPORTS)
    for record in reversed(records):  # the newest bundle timed both ways: one bundle's pair
        verified = record.get("verified")
        if (
            _number(record.get("seconds"))
            and isinstance(verified, dict)
            and _number(verified.get("seconds"))
        ):
            return {
                "export": (float(record["seconds"]), f"{record['file']} seconds"),
                "verify": (float(verified["seconds"]), f"{record['file']} verified.seconds"),
            }
    for record in reversed(records):
        if out["export"] is None and _number(record.get("seconds")):
            out["export"] = (float(record["seconds"]), f"{record['file']} seconds")
        verified = record.get("verified")
        if (
            out["verify"] is None
            and isinstance(verified, dict)
            and _number(verified.get("seconds"))
        ):
            out["verify"] = (float(verified["seconds"]), f"{record['file']} verified.seconds")
    for e in reversed(store.events()):
        if out["verify"] is None and e.get("event") == "verify" and _number(e.get("seconds")):
            out["verify"] = (float(e["seconds"]), f"events.jsonl verify of {e.get('time')} seconds")
    return out


def wall_from_process(run: dict) -> bool:
    """Whether `wall_seconds` counts from the run's process's start."""
    return bool((run.get("process") or {}).get("started")) and not run.get("resumed")


def wall_seconds(run: dict) -> float | None:
    """A run's recorded time from its process's start (`process.started`: the imports, the
    model's load, a probe's fit before the record opened) or else its opening (`created`) to
    its closing (`ended`), or None. A resumed run's process is the last one: from `created`."""
    try:
        start = datetime.fromisoformat(
            run["process"]["started"] if wall_from_process(run) else run["created"]
        )
        end = datetime.fromisoformat(run.get("ended") or run["updated"])
    except (KeyError, TypeError, ValueError):
        return None
    return (end - start).total_seconds()


def timed_item(check: dict | None, name: str) -> float | None:
    """The `seconds` of one item of a check record (`reload`, `evaluation`), or None."""
    for item in (check or {}).get("items", []):
        if item.get("name") == name and _number(item.get("seconds")):
            return float(item["seconds"])
    return None


def _records(store: Store, folder: str) -> list[dict]:
    """Every JSON record of a store folder, each with its `file` and `time` (its `created`,
    else the file's modification time: size records carry no date)."""
    out = []
    for file in store.numbered(folder):
        try:
            record = read_json(file)
        except (OSError, ValueError):  # DamagedFile among them
            continue  # a reserved (empty) or damaged record measures nothing
        if isinstance(record, dict):
            seen = datetime.fromtimestamp(file.stat().st_mtime, timezone.utc)
            when = record.get("created") or seen.isoformat(timespec="seconds")
            out.append(record | {"file": str(file.relative_to(store.lab)), "time": when})
    return out


def _device_type(record: dict) -> str | None:
    return ((record.get("env") or {}).get("device") or {}).get("type")


def _newest(records: list[dict], keep: Callable[[dict], bool]) -> dict | None:
    kept = sorted(
        (r for r in records if keep(r)),
        key=lambda r: (r.get("passed") is not False, str(r["time"])),
    )
    return kept[-1] if kept else None


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and x >= 0
