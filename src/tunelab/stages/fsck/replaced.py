"""A run record that is another run's: a run folder copied in from a clone of the lab under an
id the log gave to a run of its own. Its bytes differ from the logged sha256 like any edit, and
fsck had said only "restore it from a backup", where the log's run (its record, weights and
predictions) was gone with it and `fsck --repair` made that loss permanent."""

from __future__ import annotations

from datetime import datetime

from tunelab.core.files import DamagedFile
from tunelab.core.store import Store, read_json

APART_S = 5
"""A record's `created` and its run's `run_started` event are written within a second or two."""


def replacements(store: Store, changed: list[dict]) -> dict[str, str]:
    """Of the records `Store.audit` found changed (`records`), those that are another run's,
    each with what to say of it; the log is read only where some record changed."""
    edited = [p["record"] for p in changed if p["problem"] != "missing"]
    if not edited:
        return {}
    starts = started(store)
    return {shown: why for shown in edited if (why := another_run(store, shown, starts))}


def started(store: Store) -> dict[str, tuple[int, str]]:
    """Each run record's path (as events name it) with the line and time of its `run_started`
    event."""
    return {
        e["record"]: (n, e["time"])
        for n, e in store.numbered_events()
        if e.get("event") == "run_started" and e.get("record")
    }


def another_run(store: Store, shown: str, starts: dict[str, tuple[int, str]]) -> str | None:
    """What to say of a changed record `shown` (a path relative to the lab) that was created at
    another moment than the log started its run: None for any other changed record."""
    if shown not in starts:
        return None
    try:
        record = read_json(store.lab / shown)
    except (DamagedFile, OSError, ValueError):
        return None
    created = record.get("created") if isinstance(record, dict) else None
    line, time = starts[shown]
    try:
        apart = abs(datetime.fromisoformat(created) - datetime.fromisoformat(time))
    except (TypeError, ValueError):
        return None
    if apart.total_seconds() <= APART_S:
        return None
    return (
        f"another run's record under this id: created {created}, where line {line} of the log "
        f"started this run at {time}. A run folder copied in from a clone of the lab replaced "
        "the one the log wrote, whose record, weights and predictions went with it"
    )


FIX = (
    "restore the run's folder from a backup; to keep a clone's runs, train or export them "
    "there, not copy run folders across (`fsck --repair` would accept the copy and make the "
    "loss final)"
)
