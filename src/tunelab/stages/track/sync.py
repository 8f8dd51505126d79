"""Writing one MLflow run so that it holds a `content.Wanted`, adding only what it lacks.

Tracking an unchanged lab again writes nothing. A param already there is left as it is (MLflow
never changes a param; one whose value differs is reported as a conflict, not written). A
metric point is added only at a step its key does not have yet, so a run tracked while it
trained gets its later steps and its validation metrics, and no step twice. A tag is set when
its value differs (a run's state, its verdict); an artifact is uploaded when the sha256 in its
`tunelab.artifact.<path>` tag differs; the status is set when it changed.

A run deleted in MLflow is left deleted: it is reported, never recreated behind the user.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import PurePosixPath

from tunelab.stages.track.content import Wanted

LAB_KEY = ":lab"
"""The `lab` run's key among the tracked runs (no tunelab run id can contain `:`)."""
PARAMS_PER_CALL, TAGS_PER_CALL, METRICS_PER_CALL = 100, 100, 1000  # MLflow's log_batch limits


def tracked_runs(mlflow, experiment_id: str) -> dict[str, object]:
    """The experiment's runs that tunelab wrote, by tunelab run id (the `lab` run as LAB_KEY),
    deleted ones included; of two with one id (two `track`s at once), the older."""
    from mlflow.entities import ViewType

    found: dict[str, object] = {}
    token = None
    while True:
        page = mlflow.search_runs(
            [experiment_id],
            run_view_type=ViewType.ALL,
            max_results=1000,
            order_by=["attributes.start_time ASC"],
            page_token=token,
        )
        for run in page:
            tags = run.data.tags
            key = tags.get("tunelab.run_id") or (LAB_KEY if tags.get("tunelab.lab_run") else None)
            if key is not None:
                found.setdefault(key, run)
        token = page.token
        if not token:
            return found


def sync(mlflow, experiment_id: str, wanted: Wanted, run=None) -> dict:
    """Make `run` (None: a new one) hold `wanted`; what was added, by kind."""
    if run is not None and run.info.lifecycle_stage == "deleted":
        return _done(run.info.run_id, False, skipped="deleted in MLflow: left as it is")
    new = run is None
    if new:  # found again by its identity from the start: a track stopped after this line
        # left an untagged run, and the next track a second one beside it
        identity = {
            k: wanted.tags[k] for k in ("tunelab.run_id", "tunelab.lab_run") if k in wanted.tags
        }
        run = mlflow.create_run(
            experiment_id, start_time=wanted.start, tags=identity, run_name=wanted.name
        )
    run_id = run.info.run_id
    have_params, have_tags = dict(run.data.params), dict(run.data.tags)

    from mlflow.entities import Metric, Param, RunTag

    params = [Param(k, v) for k, v in wanted.params.items() if k not in have_params]
    conflicts = sorted(k for k, v in wanted.params.items() if have_params.get(k, v) != v)
    points = _missing_points(mlflow, run_id, wanted, set(run.data.metrics))
    metrics = [Metric(p.key, p.value, p.timestamp, p.step) for p in points]
    for start in range(0, len(params), PARAMS_PER_CALL):
        mlflow.log_batch(run_id, params=params[start : start + PARAMS_PER_CALL])
    for start in range(0, len(metrics), METRICS_PER_CALL):
        mlflow.log_batch(run_id, metrics=metrics[start : start + METRICS_PER_CALL])

    tags = dict(wanted.tags)
    uploaded = []
    for path, (local, sha) in wanted.artifacts.items():
        tag = f"tunelab.artifact.{path}"
        tags[tag] = sha
        if have_tags.get(tag) != sha:  # the tag is set after the upload: a cut-short one reruns
            folder = str(PurePosixPath(path).parent)
            mlflow.log_artifact(run_id, str(local), None if folder == "." else folder)
            uploaded.append(path)
    changed = [RunTag(k, v) for k, v in tags.items() if have_tags.get(k) != v]
    for start in range(0, len(changed), TAGS_PER_CALL):
        mlflow.log_batch(run_id, tags=changed[start : start + TAGS_PER_CALL])

    status = None
    if run.info.status != wanted.status:
        status = wanted.status
        if status == "RUNNING":  # a run resumed since the last track
            mlflow.update_run(run_id, status=status)
        else:
            mlflow.set_terminated(run_id, status, end_time=wanted.end)
    return _done(
        run_id,
        new,
        params=len(params),
        metrics=len(metrics),
        tags=len(changed),
        artifacts=uploaded,
        status=status,
        conflicts=conflicts,
    )


def _missing_points(mlflow, run_id: str, wanted: Wanted, logged: set[str]) -> list:
    """The wanted points at a step their key does not have in MLflow yet (one per key and
    step); only a key MLflow already has is read back."""
    by_key = defaultdict(dict)
    for point in wanted.points:
        by_key[point.key][point.step] = point
    missing = []
    for key, points in by_key.items():
        have = {m.step for m in mlflow.get_metric_history(run_id, key)} if key in logged else ()
        missing += [p for step, p in sorted(points.items()) if step not in have]
    return missing


def untracked(info, why: str) -> dict:
    """The row of a run left out on purpose (`info`: its MLflow run's, where it has one)."""
    return _done(info.run_id if info is not None else "", False, skipped=why)


def _done(run_id: str, new: bool, skipped: str | None = None, **added) -> dict:
    row = {
        "mlflow_run": run_id,
        "new": new,
        "params": 0,
        "metrics": 0,
        "tags": 0,
        "artifacts": [],
        "status": None,
        "conflicts": [],
        "skipped": skipped,
    }
    row |= added
    row["changed"] = bool(
        new or row["params"] or row["metrics"] or row["tags"] or row["artifacts"] or row["status"]
    )
    return row
