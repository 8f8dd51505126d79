"""`tunelab track`: every run of the lab, and the lab's report and comparisons, into one MLflow
experiment, adding only what MLflow lacks (`sync`).

The experiment is named after the lab's folder unless `--experiment` names another, and holds
one lab: its `tunelab.lab_id` tag (the sha256 of the lab's first logged event, which stays when
the folder moves) is checked before anything is written, since runs are found by their
tunelab id and two labs both have an `r001-majority`; and a copy of the lab that went its own
way is refused too (`lineage`).
"""

from __future__ import annotations

import os
import shlex
from contextlib import nullcontext
from pathlib import Path

from tunelab.core.files import locked
from tunelab.core.layout import FINALS, TRACK_LOCK
from tunelab.core.ledger import doubted
from tunelab.core.store import Store
from tunelab.stages.track.content import lab_content, lab_identity, run_content, stale_report
from tunelab.stages.track.lineage import diverged, log_mark
from tunelab.stages.track.sync import LAB_KEY, sync, tracked_runs, untracked
from tunelab.stages.track.uri import Target, TrackError, client, resolve


def track_lab(lab: Path, uri: str | None = None, experiment: str | None = None) -> dict:
    """Write the lab into MLflow at `uri` (None: see `uri.resolve`); what each run got."""
    store = Store(lab)
    if not store.root.is_dir():
        raise TrackError(
            f"{store.lab}: not a lab (no .tunelab/ store); give --lab the lab folder, or start "
            "one with `tunelab init` and `tunelab data`"
        )
    with _one_at_a_time(store):
        return _tracked(store, resolve(store.lab, uri), experiment)


def _one_at_a_time(store: Store):
    """The lab's track lock: a second `track` of this lab waits for the first to finish. A
    read-only lab (an archived one, tracked into a store elsewhere) takes none."""
    if not os.access(store.root, os.W_OK):
        return nullcontext()
    return locked(store.path(TRACK_LOCK))


def _tracked(store: Store, target: Target, experiment: str | None) -> dict:
    mlflow = client(target)
    name = experiment or store.lab.name
    experiment_id, created = open_experiment(mlflow, name, target, store)
    have = tracked_runs(mlflow, experiment_id)
    rows = []
    comparisons = store.comparisons()  # read once: each run's verdict is looked up in them
    finals = store.records(FINALS)  # and its test metrics, once `tunelab final` opened them
    state = store.audit()  # first: a save a kill cut short is finished before it is read
    records = store.runs()
    doubt = doubted(store, records, state)  # what the file holds now, not what was measured
    for record in records:
        wanted = run_content(store, record, comparisons, finals)
        if record["id"] in doubt:  # MLflow only adds points: a value sent is never taken back
            why = f"not tracked: its record is {doubt[record['id']]} (`tunelab fsck`)"
            row = untracked(getattr(have.get(record["id"]), "info", None), why)
        else:
            row = sync(mlflow, experiment_id, wanted, have.get(record["id"]))
        rows.append({"id": record["id"], **_shown(wanted.tags), **row})
    wanted = lab_content(store)
    lab_row = None
    if wanted is not None:
        lab_row = sync(mlflow, experiment_id, wanted, have.get(LAB_KEY))
        lab_row["artifacts_held"] = sorted(wanted.artifacts)
        lab_row["stale_report"] = stale_report(store)  # uploaded as it is, but said
    for key, value in log_mark(store).items():  # how far this lab had gone when tracked
        mlflow.set_experiment_tag(experiment_id, key, value)
    every = [*rows, *([lab_row] if lab_row else [])]
    return {
        "lab": str(store.lab),
        "uri": target.uri,
        "uri_from": target.given,
        "store": target.kind,
        "experiment": {"name": name, "id": experiment_id, "new": created},
        "runs": rows,
        "lab_run": lab_row,
        "counts": {
            "new": sum(r["new"] for r in rows),
            "updated": sum(r["changed"] and not r["new"] for r in rows),
            "unchanged": sum(not r["changed"] and not r["skipped"] for r in rows),
            "skipped": sum(bool(r["skipped"]) and r["id"] not in doubt for r in rows),
            "doubted": sum(r["id"] in doubt for r in rows),
        },
        "added": {kind: sum(r[kind] for r in every) for kind in ("params", "metrics", "tags")}
        | {"artifacts": sum(len(r["artifacts"]) for r in every)},
        "ui": ui_command(target),
    }


def open_experiment(mlflow, name: str, target: Target, store: Store) -> tuple[str, bool]:
    """The experiment's id, created for this lab when missing; refused when it holds another
    lab or was deleted."""
    lab_id = lab_identity(store)
    found = mlflow.get_experiment_by_name(name)
    if found is None:
        tags = {"tunelab.lab": str(store.lab)} | ({"tunelab.lab_id": lab_id} if lab_id else {})
        return mlflow.create_experiment(name, target.artifacts, tags), True
    if found.lifecycle_stage == "deleted":
        raise TrackError(
            f"MLflow experiment {name!r} at {target.uri} is deleted: restore it in MLflow, or "
            "track into another with --experiment NAME"
        )
    theirs = found.tags.get("tunelab.lab_id")
    if theirs and lab_id and theirs != lab_id:
        raise TrackError(
            f"MLflow experiment {name!r} at {target.uri} holds another lab's runs (lab "
            f"{theirs}, tracked from {found.tags.get('tunelab.lab', 'elsewhere')}; this lab "
            f"is {lab_id}); runs are matched by their tunelab id, so one experiment holds one "
            "lab: track this one with --experiment NAME"
        )
    if why := diverged(store, found.tags):
        raise TrackError(
            f"MLflow experiment {name!r} at {target.uri} holds this lab's runs, but {why}; "
            "track this lab with --experiment NAME"
        )
    if lab_id and not theirs:
        mlflow.set_experiment_tag(found.experiment_id, "tunelab.lab_id", lab_id)
        mlflow.set_experiment_tag(found.experiment_id, "tunelab.lab", str(store.lab))
    return found.experiment_id, False


def ui_command(target: Target) -> str | None:
    """How to look at a local store in MLflow's UI (which needs the full `mlflow` package)."""
    if target.kind == "sqlite":
        return f"mlflow ui --backend-store-uri {shlex.quote(target.uri)}"
    if target.kind == "file":
        uri = shlex.quote(target.uri)
        return f"MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri {uri}"
    return None


def _shown(tags: dict[str, str]) -> dict:
    return {"state": tags.get("tunelab.state"), "verdict": tags.get("tunelab.verdict")}
