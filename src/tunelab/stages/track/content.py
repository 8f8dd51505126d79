"""What the lab puts into MLflow, read from its store; nothing here imports MLflow.

A tunelab run becomes one `Wanted` MLflow run: params (the resolved spec, flattened to dotted
keys, values as the spec writes them), metric points (the loss history by step as `train/loss`,
`train/lr`, ...; the evaluation metrics at the last step as `validation/accuracy`,
`validation/per_class/sport/f1`, ...; a forgetting set's scores, which a guardrail judges, as
`guard/general/news.jsonl/bits_per_byte`), `tunelab.*` tags, its record.json, and MLflow's status
and times; once `tunelab final` opened the test split for it, its test metrics (`test/...`,
the last look), which look that was (`tunelab.final`), and the final's record. The lab
itself becomes one more, `lab`: the report page and every comparison record.

Names and values are fitted to MLflow's rules (`names`), so that a second `track` compares
like with like. Times are the records' own (a run's `created`, a step's `seconds` after it),
never the time of tracking: the same lab gives the same points.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from tunelab.core.digest import sha256_file
from tunelab.core.layout import FINALS, HISTORY, RECORD
from tunelab.core.ledger import effective_status
from tunelab.core.store import Store
from tunelab.stages.track.names import TAG_LENGTH, flatten, millis, name, number, scalars

REPORT = "lab-report.html"
"""`tunelab report`'s default page in the lab folder."""
LAB_RUN = "lab"
STATUS = {
    "completed": "FINISHED",
    "failed": "FAILED",
    "invalid": "FAILED",
    "interrupted": "KILLED",
    "lost": "KILLED",
    "running": "RUNNING",
}
"""A tunelab state as MLflow's run status (the state itself is the `tunelab.state` tag)."""


@dataclass(frozen=True)
class Point:
    key: str
    value: float
    step: int
    timestamp: int
    """Milliseconds since the epoch, from the record."""


@dataclass
class Wanted:
    """What one MLflow run should hold."""

    name: str
    tags: dict[str, str]
    params: dict[str, str] = field(default_factory=dict)
    points: list[Point] = field(default_factory=list)
    artifacts: dict[str, tuple[Path, str]] = field(default_factory=dict)
    """Path in the run -> (the local file, its sha256)."""
    status: str = "FINISHED"
    start: int | None = None
    end: int | None = None


def run_content(
    store: Store,
    record: dict,
    comparisons: list[dict] | None = None,
    finals: list[dict] | None = None,
) -> Wanted:
    """One tunelab run as an MLflow run (see the module docstring); `comparisons` and
    `finals`: the lab's, read once for every run (`Store.judgement`, `Store.records`)."""
    run_dir = store.runs_dir / record["id"]
    state = effective_status(record, run_dir)
    start, end = millis(record.get("created")), millis(record.get("ended"))
    steps = history(run_dir, record)
    points = [
        Point(f"train/{name(key)}", float(value), entry["step"], _at(start, entry))
        for entry in steps
        for key, value in entry.items()
        if key != "step" and number(value)
    ]
    split = (record.get("protocol") or {}).get("split") or "validation"
    last = steps[-1]["step"] if steps else 0
    when = end or millis(record.get("updated")) or start or 0
    for key, value in scalars(record.get("metrics") or {}).items():
        points.append(Point(f"{split}/{key}", value, last, when))
    for on, scored in (record.get("guard") or {}).items():  # the forgetting sets' guardrail
        for key, value in scalars(scored.get("metrics") or {}, f"guard/{name(on)}").items():
            points.append(Point(key, value, last, when))
    tags = run_tags(store, record, state, comparisons)
    artifacts = {RECORD: _file(run_dir / RECORD)}
    own = [f for f in finals or [] if f.get("run") == record["id"] and f.get("metrics")]
    if own:  # the sealed test split, opened for this run by `tunelab final`: its last look
        final = own[-1]
        at = millis(final.get("time")) or when
        for key, value in scalars(final["metrics"]).items():
            points.append(Point(f"test/{key}", value, last, at))
        tags |= _final_tags(final)
        artifacts[f"{FINALS}/{Path(final['file']).name}"] = _file(store.lab / final["file"])
    return Wanted(
        name=record["id"],
        tags=tags,
        params=flatten(record.get("spec") or {}),
        points=points,
        artifacts=artifacts,
        status=STATUS.get(state, "RUNNING"),
        start=start,
        end=end if state != "running" else None,
    )


def run_tags(
    store: Store, record: dict, state: str, comparisons: list[dict] | None = None
) -> dict[str, str]:
    """Run id, parent, state, data version and verdict, and what a team filters by."""
    tags = {
        "tunelab.run_id": record["id"],
        "tunelab.state": state,
        "tunelab.data_version": record["data_version"],
        "tunelab.kind": record["kind"],
        "tunelab.method": record.get("method"),
        "tunelab.task": record.get("task"),
        "tunelab.parent": record.get("parent"),
        "tunelab.base_model": (record.get("base_model") or {}).get("name"),
        "tunelab.group": (record.get("replicate") or {}).get("group"),
        "tunelab.invalid_why": (record.get("invalidated") or {}).get("why"),
    }
    judged = store.judgement(record["id"], comparisons=comparisons)
    if judged is not None:
        comparison, row = judged
        tags["tunelab.verdict"] = row.get("verdict")
        tags["tunelab.comparison"] = comparison["id"]
        tags["tunelab.verdict_against"] = row.get("against") or comparison.get("reference")
        boot = (row.get("vs_reference") or {}).get("bootstrap") or {}
        metric = (row.get("vs_reference") or {}).get("metric")
        if metric and all(number(boot.get(k)) for k in ("delta", "low", "high")):
            tags["tunelab.verdict_interval"] = (
                f"{metric} {boot['delta']:+.4f} ({boot['low']:+.4f}, {boot['high']:+.4f}), "
                f"{boot.get('basis', 'examples')}"
            )
    return {k: str(v)[:TAG_LENGTH] for k, v in tags.items() if v not in (None, "")}


def _final_tags(final: dict) -> dict[str, str]:
    """Which look at the test split a run's test metrics are: `final` 1 of the lab's, or a
    repeated one (whose score is no unbiased estimate)."""
    tags = {"tunelab.final": str(final["n"]), "tunelab.final_reason": final.get("reason")}
    if final.get("repeated"):
        tags["tunelab.final_repeated"] = "true: the test split had been opened before"
    return {k: str(v)[:TAG_LENGTH] for k, v in tags.items() if v not in (None, "")}


def lab_content(store: Store) -> Wanted | None:
    """The `lab` run: the report page and every comparison record, or None when the lab has
    neither yet."""
    artifacts = {}
    report = store.lab / REPORT
    if report.is_file():
        artifacts[REPORT] = _file(report)
    ids = []
    for path in store.numbered("comparisons"):
        artifacts[f"comparisons/{path.name}"] = _file(path)
        ids.append(path.stem)
    if not artifacts:
        return None
    tags = {"tunelab.lab_run": "true", "tunelab.lab": str(store.lab)}
    if ids:
        tags["tunelab.comparisons"] = ",".join(ids)[:TAG_LENGTH]
    events = store.events()
    start, end = (millis(events[i].get("time")) if events else None for i in (0, -1))
    return Wanted(LAB_RUN, tags, artifacts=artifacts, start=start, end=end)


def stale_report(store: Store) -> str | None:
    """Why the lab's report page, uploaded as it is, is not the lab as it stands (None when it
    is, or there is no page): a page is current when its sha256 is the one the log's last
    `report` event of it wrote and nothing but reports was logged after that."""
    page = store.lab / REPORT
    if not page.is_file():
        return None
    events = store.events()
    digest = sha256_file(page)
    written = [
        i
        for i, e in enumerate(events)
        if e.get("event") == "report" and e.get("file") == REPORT and e.get("sha256") == digest
    ]
    if not written:
        return f"{REPORT} is not a page `tunelab report` logged in this lab (edited, or copied in)"
    later = [e for e in events[written[-1] + 1 :] if e.get("event") != "report"]
    if not later:
        return None
    last = later[-1]
    what = " ".join(str(last[k]) for k in ("event", "run") if last.get(k))
    return (
        f"{REPORT} was written before {len(later)} later event{'s' if len(later) > 1 else ''} "
        f"(the last: {what} at {last.get('time', '?')})"
    )


def history(run_dir: Path, record: dict) -> list[dict]:
    """The run's loss history, one entry a step (the last of any step written twice): the
    record's when the run has ended, else `history.jsonl` as far as it was written."""
    entries = (record.get("training") or {}).get("history")
    if not isinstance(entries, list):
        entries = []
        path = run_dir / HISTORY
        for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:  # the last line, cut by a kill while it was written
                break
    by_step = {e["step"]: e for e in entries if isinstance(e, dict) and number(e.get("step"))}
    return [by_step[s] for s in sorted(by_step)]


def lab_identity(store: Store) -> str | None:
    """A short, stable id of the lab: the sha256 of its log's first line (None before any)."""
    if not store.log_path.is_file():
        return None
    with store.log_path.open("rb") as log:
        line = log.readline().strip()
    return hashlib.sha256(line).hexdigest()[:16] if line else None


def _at(start: int | None, entry: dict) -> int:
    seconds = entry.get("seconds")
    return (start or 0) + (int(seconds * 1000) if number(seconds) else 0)


def _file(path: Path) -> tuple[Path, str]:
    return path, sha256_file(path)
