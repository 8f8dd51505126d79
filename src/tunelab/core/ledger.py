"""The experiment ledger: every run's record, opened before work starts and never deleted.

A record is written as soon as the run exists (status `running`) and rewritten atomically as
it ends (`completed`, `interrupted`, `failed`), so a crash never loses a run from the record.
The work of a run goes inside `recording`, which closes the record however the work ends.
"""

from __future__ import annotations

import json
import os
import socket
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from tunelab.core.env import command_started, fingerprint
from tunelab.core.errors import Interrupted, TrainingInterrupted, TunelabError, stop_cause
from tunelab.core.lab import lab_flag
from tunelab.core.layout import HEARTBEAT, STORE_DIR
from tunelab.core.replicates import again_command
from tunelab.core.stopping import held
from tunelab.core.store import now

if TYPE_CHECKING:
    from tunelab.core.lab import Lab


def open_run(lab: Lab, name: str, kind: str, data_version: str, **fields) -> tuple[dict, Path]:
    run_id, run_dir = lab.store.new_run(name)
    record = {
        "id": run_id,
        "name": name,
        "kind": kind,
        "status": "running",
        "created": now(),
        "data_version": data_version,
        "task": lab.spec.task.type,
        "spec": lab.spec.to_dict(),
        "env": fingerprint(lab.device),
        "process": {"pid": os.getpid(), "host": socket.gethostname()}
        | ({"started": started} if (started := command_started()) else {}),
        **fields,
    }
    try:
        lab.store.write_record(run_id, record, "run_started", kind=kind)
    except BaseException:  # refused or stopped: the folder reserved for it goes, still empty
        with suppress(OSError):
            run_dir.rmdir()
        raise
    return record, run_dir


def reopen_run(lab: Lab, record: dict) -> None:
    """A resumed run is running again, in this process."""
    record["status"] = "running"
    record["process"] = {"pid": os.getpid(), "host": socket.gethostname()}
    record.pop("error", None)
    lab.store.write_record(record["id"], record, "run_resumed")


def invalidate(store, run_id: str, why: str) -> dict:
    """Mark a run invalid (a bug found, a leak): it stays in the record, with the reason."""
    if not why.strip():
        raise TunelabError("invalidate needs --why: say what makes the run invalid")
    record = store.read_record(run_id)
    if record["status"] == "invalid":  # a second reason had replaced the first in the record
        first = (record.get("invalidated") or {}).get("why")
        raise TunelabError(
            f"{run_id} is invalid already ({first}): its record keeps that reason; nothing was "
            "changed"
        )
    was = effective_status(record, store.run_dir(run_id))  # `lost`, where its process is gone
    record["invalidated"] = {"why": why, "time": now(), "previous_status": was}
    record["status"] = "invalid"
    store.write_record(run_id, record, "run_invalid", why=why)
    return record


STALE_SECONDS = 600
"""A running run whose heartbeat is older than this (or whose process is gone) is lost."""


def described(record: dict, run_dir: Path) -> str:
    """A run as a message names it by its status (`effective_status`: "lost", never "running",
    for a run whose process is gone) and kind: "an interrupted variant"."""
    status = effective_status(record, run_dir) if record.get("status") else "unknown"
    return f"{'an' if status[0] in 'aeiou' else 'a'} {status} {record.get('kind', 'run')}"


def effective_status(record: dict, run_dir: Path) -> str:
    """`lost` for a run recorded as running whose process died without a word (kill -9)."""
    if record["status"] != "running":
        return record["status"]
    proc = record.get("process", {})
    if proc.get("host") == socket.gethostname() and not _alive(proc.get("pid")):
        return "lost"
    last = (_heartbeat(run_dir) or {}).get("time") or record["updated"]
    try:
        age = datetime.now(timezone.utc) - datetime.fromisoformat(last)
    except (TypeError, ValueError):  # a heartbeat edited by hand: judged by the record's time
        age = datetime.now(timezone.utc) - datetime.fromisoformat(record["updated"])
    return "lost" if age.total_seconds() > STALE_SECONDS else "running"


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def close_run(lab: Lab, record: dict, status: str, error: BaseException | None = None) -> None:
    """Write the run's last status (with the traceback of `error`); a Ctrl-C or SIGTERM
    meanwhile waits until the record is written."""
    record["status"] = status
    record["ended"] = now()
    if error is not None:
        record["error"] = "".join(traceback.format_exception(error))
    with held():
        lab.store.write_record(record["id"], record, "run_" + status)


@contextmanager
def recording(
    lab: Lab, record: dict, checkpoint: Callable[[], str | None] | None = None
) -> Iterator[dict]:
    """Do a run's work inside this block; the record is closed however the block ends.

    - normally: `completed`;
    - Ctrl-C, SIGTERM (KeyboardInterrupt) or a training stop (TrainingInterrupted):
      `interrupted`, with `record["checkpoint"]` set to `checkpoint()` (the run's checkpoint
      folder relative to the run, or None), then `Interrupted` is raised from the stop: it says
      whether `tunelab resume RUN` can continue the run;
    - any other exception: `failed`, with its traceback in `record["error"]` and its checkpoint
      (as for a stop), and the exception goes on, with a note saying to resume where a
      checkpoint remains (a peer process killed under torchrun, say).

    A record that cannot be written as the run fails (a full disk) stays `running` and is
    shown as `lost`; the first error is the one that goes on.
    """
    try:
        yield record
    except (KeyboardInterrupt, TrainingInterrupted) as err:
        record["checkpoint"] = checkpoint() if checkpoint else None
        _close_quietly(lab, record, "interrupted", err)
        raise _interrupted(record, err, lab_flag(lab.path)) from err
    except Exception as err:
        record["checkpoint"] = _quietly(checkpoint)
        _close_quietly(lab, record, "failed", err)
        # a peer process lost, a crash: what it trained is kept (not a loss gone NaN, which
        # would come again on the same settings)
        if record["checkpoint"] and getattr(err, "resumable", True):
            err.add_note(
                f"run {record['id']} failed; its checkpoint ({record['checkpoint']}) remains: "
                f"`tunelab resume {record['id']}{lab_flag(lab.path)}` continues it from there"
            )
        raise
    close_run(lab, record, "completed")


def _quietly(checkpoint: Callable[[], str | None] | None) -> str | None:
    """The run's checkpoint folder, or None (none asked for, or none readable as it fails)."""
    try:
        return checkpoint() if checkpoint else None
    except Exception:  # the failure being handled is the one to report
        return None


def _close_quietly(lab: Lab, record: dict, status: str, error: BaseException) -> None:
    """Close the run as it ends with `error`; a failure to write the record (a full disk) or
    another Ctrl-C meanwhile does not replace the error being handled."""
    with suppress(OSError, KeyboardInterrupt):
        close_run(lab, record, status, error)


def _interrupted(record: dict, err: BaseException, flag: str = "") -> Interrupted:
    """What a stopped run left and the command that goes on (`flag`: ` --lab DIR`, or "")."""
    run = record["id"]
    if record.get("weights") and record.get("training"):  # saved as training ended
        outcome = (
            f"run {run} finished training and saved its weights, then stopped before its "
            f"evaluation was recorded; `tunelab resume {run}{flag}` evaluates it."
        )
        return Interrupted(stop_cause(err), outcome, run=run, resumable=True)
    if record.get("checkpoint"):
        outcome = (
            f"run {run} is recorded as interrupted, with its checkpoint; "
            f"`tunelab resume {run}{flag}` continues it."
        )
    else:
        outcome = (
            f"run {run} is recorded as interrupted; it has no checkpoint, so it cannot be "
            "resumed: run the command again to start it over."
        )
    return Interrupted(stop_cause(err), outcome, run=run, resumable=bool(record.get("checkpoint")))


TIMED = ("steps", "seconds", "tokens", "tokens_per_s", "peak_memory_mb")
"""What `runs` shows of a run's training."""


def summary(record: dict, run_dir: Path) -> dict:
    """One line of `tunelab runs`: status (with `lost` detected) and the primary metric."""
    metrics = record.get("metrics") or {}
    hypothesis = record.get("spec", {}).get("hypothesis")
    if hypothesis:
        metric = hypothesis["metric"]
    else:
        from tunelab.tasks import get_task

        metric = get_task(record["task"]).default_metric
    status = effective_status(record, run_dir)
    return {
        "id": record["id"],
        "kind": record["kind"],
        "status": status,
        "at": _last_beat(run_dir) if status == "running" else None,
        "data_version": record["data_version"],
        "method": record.get("method"),
        "metric": metric,
        "value": metrics.get(metric),
        "created": record["created"],
        # a baseline draws no seed (its spec's default is not one it used)
        "seed": None
        if record["kind"] == "baseline"
        else (record.get("spec", {}).get("training") or {}).get("seed"),
        "group": (record.get("replicate") or {}).get("group"),
        # what a plan reads of it, so `runs --json` can check one (it held no time at all)
        "training": {k: trained.get(k) for k in TIMED}
        if (trained := record.get("training"))
        else None,
    }


def _heartbeat(run_dir: Path) -> dict | None:
    """A running run's heartbeat, or None where there is none or it does not read (a disk that
    filled as it was written): the record's own `updated` time stands in for it."""
    try:
        beat = json.loads((run_dir / HEARTBEAT).read_text())
    except (OSError, ValueError):
        return None
    return beat if isinstance(beat, dict) else None


def _last_beat(run_dir: Path) -> dict | None:
    """Where a running run was at its last heartbeat: step, of how many, loss, time."""
    beat = _heartbeat(run_dir)
    return (
        {k: beat.get(k) for k in ("step", "of", "loss", "time")} if beat and "of" in beat else None
    )


def listing(store) -> list[dict]:
    """`tunelab runs`: every run's `summary`, with its replicate group and the seeds that group
    planned. A noise floor's first seed was trained before its group existed, so its record
    names none: the group's does."""
    groups = store.groups()
    member_of = {m["run"]: g["id"] for g in groups for m in g.get("members", []) if m.get("run")}
    planned = {g["id"]: len(g.get("seeds") or []) for g in groups}
    # each group's runs as its record lists them, counted ones too: a run trained by one group
    # and counted by a later one belongs to both (each had read "1 of 2 planned seeds")
    runs_of = {g["id"]: [m["run"] for m in g.get("members", []) if m.get("run")] for g in groups}
    again = {g["id"]: again_command(g) for g in groups}
    for earlier, later in _continued(groups):  # the same command, run again: it went on there
        again[earlier] = f"continued by {later}"
    state = store.audit()  # first: a save a kill cut short is finished before it is read
    records = store.runs()
    rows = [summary(r, store.runs_dir / r["id"]) for r in records]
    doubt = doubted(store, records, state)
    out = []
    for r in rows:
        group = r["group"] or member_of.get(r["id"])
        row = r | {"group": group, "doubt": doubt.get(r["id"])}
        if group:
            row["group_seeds"] = planned.get(group)  # the seeds it planned, trained or not
            row["group_runs"], row["group_again"] = runs_of.get(group), again.get(group)
        out.append(row)
    return out


def _continued(groups: list[dict]) -> list[tuple[str, str]]:
    """(a group, the later one that went on with it): the same command (kind, name, the run a
    noise floor is of, the planned seeds) run again after a stop, which counts the seeds
    trained and trains the rest in a group of its own."""
    out, latest = [], {}
    for g in sorted(groups, key=lambda g: g["id"]):
        key = (g.get("kind"), g.get("name"), g.get("of"), tuple(g.get("seeds") or []))
        if key in latest:
            out.append((latest[key], g["id"]))
        latest[key] = g["id"]
    return out


def doubted(store, records: list[dict], state: dict) -> dict[str, str]:
    """The runs whose record the event log does not vouch for, with why: edited after the event
    that wrote it, or (store format 2) in no event at all: a log cut short or deleted. Their
    values are what the file holds now, not what the run measured (`tunelab fsck`)."""
    from tunelab.core.unlogged import unlogged

    changed = {p["record"] for p in state["records"]}
    unvouched = {
        str(p.relative_to(store.lab)) for p in unlogged(store.root, store.lab, state["hashed"])
    }
    out = {}
    for record in records:
        shown = f"{STORE_DIR}/runs/{record['id']}/record.json"
        if shown in changed:
            out[record["id"]] = "edited after the log wrote it"
        elif shown in unvouched:
            out[record["id"]] = "in no event of the log"
    return out
