"""`tunelab fsck`: check a whole lab's integrity, reading only the lab.

What it checks, each problem named with its path and what to do:

- **the event log's chain** (`core.chain`): every line follows the one before it;
- **every record** against the sha256 the event that wrote it holds (`Store.audit`): a record
  edited, replaced or deleted afterwards is named with the line that wrote it, and a run record
  created at another moment than the log started its run as another run's (`replaced`);
- **every data version** against its manifest: each file's sha256, the sealed test split's
  included (a tampered seal is a changed `test.jsonl`); each version named by a `data` event,
  and CURRENT the version the log's last data step made current;
- **every comparison** against the runs it judged: each input's `predictions.jsonl` still has
  the sha256 the comparison recorded;
- **every final's** per-example predictions on the test split, as its record hashed them;
- **every run folder**: a folder without `record.json` (an orphan), a completed run whose
  weights or predictions are missing or no longer have the sha256 its record holds;
- **every bundle** under `bundles/` against its `SHA256SUMS`, that listing against the one its
  export record hashed (a file changed with its line there), and the log's head the bundle
  recorded at export (`lab_log`) still in the log: a log rewritten whole, chain and all, is
  told from the bundle;
- **leftovers**: hidden temporary folders or files (`.*.tmp`) that a killed command left;
- **records the log never wrote**: a record of store format 2 whose sha256 no event holds (the
  log cut short, deleted or replaced, or a record put in by hand), and any record or manifest
  that no longer reads as JSON.

What a lab written before store format 2 did not hash (its records, its runs' weights) is
listed in the result's `not_checked`. `--repair --reason R` appends a `chain_break` event with
the reason, which forgives the log's current breaks and accepts each changed record as it now
is; it repairs nothing else.
"""

from __future__ import annotations

from pathlib import Path

from tunelab.core.audit import written_in_format_2
from tunelab.core.chain import BREAK
from tunelab.core.digest import sha256_file
from tunelab.core.errors import TunelabError
from tunelab.core.files import DamagedFile
from tunelab.core.layout import FORMAT, MANIFEST, begun_in_format_2
from tunelab.core.spec import SPEC_FILE
from tunelab.core.store import Store, read_json
from tunelab.core.unlogged import record_files, unlogged
from tunelab.stages.fsck import data, folders, replaced
from tunelab.stages.fsck.problems import problem_at, rel


def _older_records(store: Store, hashed: set[str]) -> list[str]:
    """The records written before store format 2, which no event hashed: read as they are, so
    named as not checked (a format-1 lab's had gone unsaid). In a lab begun in format 2 there
    are none: a record without its hash there is a problem (`unlogged`)."""
    if begun_in_format_2(store.format):
        return []
    older = []
    for path in record_files(store.root):
        if str(path.relative_to(store.lab)) in hashed:
            continue
        try:
            record = read_json(path)
        except DamagedFile:  # named as a problem by `_unreadable`
            continue
        if isinstance(record, dict) and record.get("store_format", 1) < 2:
            older.append(rel(store, path))
    if not older:
        return []
    shown = ", ".join(older[:5]) + (f" and {len(older) - 5} more" if len(older) > 5 else "")
    return [
        f"{len(older)} record(s) written before store format 2, which the log holds no sha256 "
        f"of, read as they are: {shown}"
    ]


def fsck(lab_path: Path, repair: bool = False, reason: str | None = None) -> dict:
    store = Store(lab_path)
    if not store.root.exists():
        if (Path(lab_path) / SPEC_FILE).is_file():  # a lab no command has written to yet
            raise TunelabError(
                f"{lab_path} has a {SPEC_FILE} and no store yet ({store.root}): no `tunelab "
                "data` has completed here (one stopped before its version was whole leaves "
                "none); run `tunelab data`, then fsck has a store to check"
            )
        raise TunelabError(f"{lab_path} has no store ({store.root}): not a tunelab lab")
    log = store.audit()
    if repair:
        unvouched = unlogged(store.root, store.lab, log["hashed"])
        log = _repair(store, log, reason, unvouched + data.unlogged_versions(store))
    problems = [
        {
            "check": "log",
            "path": f"{rel(store, store.log_path)}:{p['line']}",
            "problem": p["problem"],
            "fix": "restore the log from a backup, or `tunelab fsck --repair --reason R`",
        }
        for p in log["problems"]
    ]
    records = log.pop("records")
    lost = replaced.replacements(store, records)  # another run's record, under this one's id
    problems += [
        {
            "check": "records",
            "path": p["record"],
            "problem": lost.get(p["record"], p["problem"]),
            "fix": replaced.FIX
            if p["record"] in lost
            else "restore it from a backup (the log's line holds its sha256)",
        }
        for p in records
    ]
    hashed = log.pop("hashed")
    problems += [
        problem_at(
            store,
            "records",
            path,
            "no event in the log holds its sha256: the log was cut short, deleted or "
            "replaced, or the record was put here by hand",
            "restore the log from a backup, or accept the record as it is with "
            "`tunelab fsck --repair --reason R`",
        )
        for path in unlogged(store.root, store.lab, hashed)
    ]
    problems += [
        problem_at(store, "records", path, why, "restore it from a backup")
        for path, why in _unreadable(store)
    ]
    problems += _format_missing(store)
    checked = {"log_lines": log["lines"], "records": log.pop("records_hashed")}
    not_checked: list[str] = _older_records(store, hashed)
    for name, check in CHECKS.items():
        found, count = check(store, not_checked)
        problems += found
        checked[name] = count
    return {
        "lab": str(store.lab),
        "passed": not problems,
        "problems": problems,
        "checked": checked,
        "log": log,
        "format": store.format["format"],
        "not_checked": not_checked,
    }


def _format_missing(store: Store) -> list[dict]:
    """The store's format.json gone from a lab whose log a format-2 tunelab wrote (its events
    hash their records): the next writer would take it for a format-1 lab and say so."""
    path = store.root / FORMAT
    if path.exists() or not written_in_format_2(store):
        return []
    problem = "missing, though the event log was written in store format 2"
    return [problem_at(store, "format", path, problem, 'restore it, or write {"format": 2} in it')]


def _repair(store: Store, log: dict, reason: str | None, unvouched: list[Path]) -> dict:
    if not (reason and reason.strip()):
        raise TunelabError('fsck --repair needs --reason "why": the break is recorded with it')
    if not log["problems"] and not log["records"] and not unvouched:
        return log
    accepted = {
        p["record"]: sha256_file(store.lab / p["record"]) if p["problem"] != "missing" else None
        for p in log["records"]
    }
    accepted |= {rel(store, path): sha256_file(path) for path in unvouched}
    forgives = [p["line"] for p in log["problems"]]
    lost = replaced.replacements(store, log["records"])  # said in the break itself
    extra = {"replaced": lost} if lost else {}
    store.log_event(BREAK, reason=reason.strip(), forgives=forgives, accepted=accepted, **extra)
    return store.audit()


def _unreadable(store: Store) -> list[tuple[Path, str]]:
    """Records and data manifests that no longer read as JSON, with why."""
    out = []
    for path in [*record_files(store.root), *store.data_manifests()]:
        try:
            value = read_json(path)
        except DamagedFile as err:
            out.append((path, err.why))
            continue
        if not isinstance(value, dict):  # valid JSON of another shape is no record either
            out.append((path, f"a JSON {type(value).__name__}, not the object tunelab wrote"))
        elif path.name == MANIFEST and not value.get("files"):
            out.append((path, "a manifest with no file hashes: its splits cannot be checked"))
    return out


CHECKS = {
    "data_files": data.data_files,
    "comparison_inputs": folders.comparison_inputs,
    "final_predictions": folders.final_predictions,
    "run_folders": folders.run_folders,
    "bundles": folders.bundles,
    "leftovers": folders.leftovers,
}
"""Each check: the lab's store and a list to say what it could not check -> (its problems, how
many things it looked at)."""
