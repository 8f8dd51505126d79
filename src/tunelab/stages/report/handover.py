"""The report's handover sections, read from the store's records: every opening of the sealed
test split, and every exported bundle as its model card sums it up."""

from __future__ import annotations

from pathlib import Path

from tunelab.core.exports import BUNDLE_FILE, SCRATCH_BASE
from tunelab.core.files import DamagedFile
from tunelab.core.layout import EXPORTS
from tunelab.core.store import Store, StoreError, read_json


def finals(store: Store) -> dict:
    """Every opening of the sealed test split (the `final` events), in order, with its
    test score beside the validation score when the final's record is there."""
    warning = None
    try:
        events = store.events(strict=True)
    except StoreError as err:
        warning, events = str(err), store.events()
    rows = []
    for e in events:
        if e.get("event") != "final":
            continue
        path = store.lab / e["file"] if e.get("file") else None
        record = read_json(path) if path and path.is_file() else None
        metric = (record or {}).get("primary_metric")
        rows.append(
            e
            | {
                "metric": metric,
                "test": ((record or {}).get("metrics") or {}).get(metric),
                "interval": _interval(record, metric),
                "validation": ((record or {}).get("validation_metrics") or {}).get(metric),
                "copied": ((record or {}).get("copied_in_validation") or {}).get("rows"),
                "invalid": invalidated(store, e.get("run")),
            }
        )
    return {"rows": rows, "warning": warning}


def _interval(record: dict | None, metric: str | None) -> dict | None:
    """The test score's interval over the test examples, where it is of the metric shown."""
    interval = (record or {}).get("interval")
    return interval if interval and metric and interval.get("metric") == metric else None


def _where(record: dict, store: Store | None) -> dict:
    """An export record's bundle as the page shows it: relative to the lab where it lies inside
    it, else as recorded, and whether it is there. The bundle is looked for as fsck and verify
    find it: at the same place inside this lab first (a lab moved or copied keeps the old
    absolute path in its records: a bundle moved with it read "not found", and a copy showed
    the original lab's as its own), then where recorded; either must be the bundle of the
    record's run, made at its moment."""
    bundle = record.get("bundle")
    if not bundle or store is None:
        return {"path": bundle, "found": None}
    recorded = Path(bundle)
    inside = [store.lab / Path(*recorded.parts[-k:]) for k in range(1, len(recorded.parts))]
    made = (record.get("run"), record.get("created"))
    for path in [*inside, recorded]:
        if _made(path) == made:
            try:
                return {"path": path.relative_to(store.lab).as_posix(), "found": True}
            except ValueError:  # another folder's: a lab copied without its bundles
                return {"path": str(path), "found": True, "outside": True}
    return {"path": bundle, "found": False}


def _made(bundle: Path) -> tuple | None:
    """The run and moment a bundle says it was made for (`tunelab.json`), or None."""
    try:
        info = read_json(bundle / BUNDLE_FILE)
    except (DamagedFile, OSError, ValueError):
        return None
    return (info.get("run"), info.get("created")) if isinstance(info, dict) else None


def invalidated(store: Store, run_id: str | None) -> str | None:
    """Why the run was invalidated after its final or export (`tunelab invalidate`), or None:
    the verdict those records keep was given before, and no longer stands."""
    if not run_id:
        return None
    try:
        record = store.read_record(run_id)
    except (StoreError, OSError, ValueError):
        return None
    if record.get("status") != "invalid":
        return None
    return (record.get("invalidated") or {}).get("why") or "no reason recorded"


def exports(store: Store, finals: list[dict]) -> list[dict]:
    """Every exported bundle (`export`), each with the opening of the test split it carries:
    its run's last final made before the bundle (a bundle exported before it has none, and its
    card says so)."""
    out = []
    for path in store.numbered(EXPORTS):
        x = export(path, store)
        made = [
            f
            for f in finals
            if f.get("run") == x["run"] and not (x["created"] and f.get("time", "") > x["created"])
        ]
        out.append(x | {"final": made[-1] if made else None})
    return out


def export(path: Path, store: Store | None = None) -> dict:
    """A bundle as its model card sums it up: the verdict it was handed over with, what
    regressed, how many validation inputs were cut, the form a server loads, and why its run
    was invalidated since, where it was."""
    record = read_json(path)
    verified = record.get("verified")
    limits = record.get("limitations") or {}
    cut = limits.get("truncation") or {}
    base = record.get("base_model") or {}
    return {
        "file": path.name,
        "run": record.get("run"),
        "bundle": _where(record, store),
        "sums_sha256": record.get("sums_sha256"),
        "base": {"name": base.get("name"), "weights_sha256": base.get("weights_sha256")},
        "created": record.get("created"),
        "verified": verified if isinstance(verified, dict) else {"passed": verified},
        "verified_on": _elsewhere(verified, base.get("path") or _own_base(record)),
        "verdict": limits.get("verdict"),
        "regressed": [
            f"{r['metric']} {r['scope']}"
            + (f" on {r['on']}" if r.get("on") else "")
            + (f" ({r['status']})" if r.get("status") else "")
            for r in limits.get("regressed") or []
        ],
        "truncation": (
            f"{cut['truncated']:,} of {cut['n']:,} {cut['split']} inputs cut to "
            f"{cut['max_length']} tokens"
            if cut.get("truncated")
            else None
        ),
        "serve": (record.get("serving") or {}).get("servable"),
        "invalid": invalidated(store, record.get("run")) if store is not None else None,
    }


def _elsewhere(verified, bound: str | None) -> str | None:
    """The base the last `verify` was given, where it is not the one the bundle is bound to."""
    given = verified.get("base") if isinstance(verified, dict) else None
    return given if given and bound and Path(given) != Path(bound) else None


def _own_base(record: dict) -> str | None:
    """A model built from scratch is bound to its bundle's own `base/` (its record names no
    base path)."""
    return str(Path(record["bundle"]) / SCRATCH_BASE) if record.get("bundle") else None
