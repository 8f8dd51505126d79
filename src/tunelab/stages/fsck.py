"""`tunelab fsck`: check a whole lab's integrity, reading only the lab.

What it checks, each problem named with its path and what to do:

- **the event log's chain** (`core.chain`): every line follows the one before it;
- **every record** against the sha256 the event that wrote it holds (`Store.audit`): a record
  edited, replaced or deleted afterwards is named with the line that wrote it;
- **every data version** against its manifest: each file's sha256, the sealed test split's
  included (a tampered seal is a changed `test.jsonl`);
- **every comparison** against the runs it judged: each input's `predictions.jsonl` still has
  the sha256 the comparison recorded;
- **every run folder**: a folder without `record.json` (an orphan), a completed run whose
  weights or predictions are missing or no longer have the sha256 its record holds;
- **every bundle** under `bundles/` against its `SHA256SUMS`, and the log's head the bundle
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
from tunelab.core.chain import BREAK, line_hash
from tunelab.core.digest import sha256_file
from tunelab.core.errors import TunelabError
from tunelab.core.exports import recorded_export
from tunelab.core.files import DamagedFile
from tunelab.core.layout import (
    BUNDLES,
    COMPARISONS,
    CURRENT,
    DATA,
    FORMAT,
    GROUPS,
    MANIFEST,
    NOISE,
    PLANS,
    PREDICTIONS,
    RECORD,
)
from tunelab.core.run_files import changed_weights, vouched, what_changed
from tunelab.core.store import Store, read_json
from tunelab.core.sums import SUMS, BundleError, compare, listed
from tunelab.core.unlogged import record_files, unlogged


def fsck(lab_path: Path, repair: bool = False, reason: str | None = None) -> dict:
    store = Store(lab_path)
    if not store.root.exists():
        raise TunelabError(f"{lab_path} has no store ({store.root}): not a tunelab lab")
    log = store.audit()
    if repair:
        log = _repair(store, log, reason, unlogged(store.root, store.lab, log["hashed"]))
    problems = [
        {
            "check": "log",
            "path": f"{_rel(store, store.log_path)}:{p['line']}",
            "problem": p["problem"],
            "fix": "restore the log from a backup, or `tunelab fsck --repair --reason R`",
        }
        for p in log["problems"]
    ]
    problems += [
        {
            "check": "records",
            "path": p["record"],
            "problem": p["problem"],
            "fix": "restore it from a backup (the log's line holds its sha256)",
        }
        for p in log.pop("records")
    ]
    hashed = log.pop("hashed")
    problems += [
        _problem(
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
        _problem(store, "records", path, why, "restore it from a backup")
        for path, why in _unreadable(store)
    ]
    problems += _format_missing(store)
    checked = {"log_lines": log["lines"], "records": log.pop("records_hashed")}
    not_checked: list[str] = []
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
    return [_problem(store, "format", path, problem, 'restore it, or write {"format": 2} in it')]


def _repair(store: Store, log: dict, reason: str | None, unvouched: list[Path]) -> dict:
    if not (reason and reason.strip()):
        raise TunelabError('fsck --repair needs --reason "why": the break is recorded with it')
    if not log["problems"] and not log["records"] and not unvouched:
        return log
    accepted = {
        p["record"]: sha256_file(store.lab / p["record"]) if p["problem"] != "missing" else None
        for p in log["records"]
    }
    accepted |= {_rel(store, path): sha256_file(path) for path in unvouched}
    forgives = [p["line"] for p in log["problems"]]
    store.log_event(BREAK, reason=reason.strip(), forgives=forgives, accepted=accepted)
    return store.audit()


def _unreadable(store: Store) -> list[tuple[Path, str]]:
    """Records and data manifests that no longer read as JSON, with why."""
    out = []
    for path in [*record_files(store.root), *sorted(store.path(DATA).glob(f"*/{MANIFEST}"))]:
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


def _rel(store: Store, path: Path) -> str:
    return str(path.relative_to(store.lab))


def _hashed(store: Store, check: str, path: Path, digest: str, changed: str, fix: str) -> list:
    """A file that must still have `digest`: no problem, or one that says missing or changed."""
    if not path.is_file():
        return [_problem(store, check, path, "missing", fix)]
    if sha256_file(path) != digest:
        return [_problem(store, check, path, changed, fix)]
    return []


def _data(store: Store, not_checked: list[str]) -> tuple[list[dict], int]:
    out, n = _versions_named(store), 0
    fix = (
        "restore it from a backup, or remove the version's folder and run `tunelab data` again "
        "(the same sources and spec build the same version)"
    )
    for manifest_path in sorted(store.path(DATA).glob(f"*/{MANIFEST}")):
        manifest, folder = _json(manifest_path), manifest_path.parent
        for name, digest in (manifest.get("files") or {}).items():
            n += 1
            what = "the sealed test split was changed" if name == "test.jsonl" else "changed"
            changed = f"{what} since the version was written (sha256 {digest[:12]} expected)"
            out += _hashed(store, "data", folder / name, digest, changed, fix)
    return out, n


def _versions_named(store: Store) -> list[dict]:
    """Data versions the store names (CURRENT, each run's) that are gone from it."""
    named: dict[str, Path] = {}
    current = store.path(DATA) / CURRENT
    if current.is_file():
        named.setdefault(current.read_text().strip(), current)
    for folder in sorted(store.runs_dir.glob(f"*/{RECORD}")) if store.runs_dir.exists() else []:
        version = _json(folder).get("data_version")
        if version:
            named.setdefault(version, folder)
    fix = (
        "restore the version's folder from a backup, or run `tunelab data` again with the "
        "sources and spec that built it"
    )
    return [
        _problem(store, "data", by, f"names data version {version}, which is gone", fix)
        for version, by in named.items()
        if not (store.path(DATA) / version / MANIFEST).is_file()
    ]


def _comparisons(store: Store, not_checked: list[str]) -> tuple[list[dict], int]:
    out, n = [], 0
    fix = "restore the run's predictions, or invalidate the run"
    for record in (_json(path) for path in store.numbered(COMPARISONS)):
        for item in record.get("inputs", []):
            n += 1
            path = store.runs_dir / item["run"] / PREDICTIONS
            changed = f"changed since comparison {record['id']} judged it"
            out += _hashed(store, "comparison", path, item["predictions_sha256"], changed, fix)
    return out, n


def _runs(store: Store, not_checked: list[str]) -> tuple[list[dict], int]:
    out, n = [], 0
    if not store.runs_dir.exists():
        return out, n
    for folder in sorted(p for p in store.runs_dir.iterdir() if p.is_dir()):
        if folder.name.startswith("."):
            continue
        n += 1
        if not (folder / RECORD).exists():
            out.append(
                _problem(
                    store,
                    "runs",
                    folder,
                    "a run folder without record.json: its command died before writing it, "
                    "or the record was deleted (then named above with the log's line)",
                    "restore the record if the log wrote one, else move the folder out of the "
                    "store once nothing needs it",
                )
            )
            continue
        record = _json(folder / RECORD)
        if record.get("status") == "completed":
            out += _run_files(store, folder, record, not_checked)
        else:  # weights saved before a stop: `resume` evaluates them, so they are checked too
            out += _saved_weights(store, folder, record)
    return out, n


def _saved_weights(store: Store, folder: Path, record: dict) -> list[dict]:
    """A run not completed whose record hashed its saved weights: as it hashed them."""
    fix = "restore it, or start the run again (`tunelab resume` refuses it as it is)"
    return [
        _problem(store, "runs", p, problem, fix) for p, problem in changed_weights(folder, record)
    ]


def _run_files(store: Store, folder: Path, record: dict, not_checked: list[str]) -> list[dict]:
    """A completed run's predictions and weights: there, and as their record hashed them."""
    fix = "restore it, or `tunelab invalidate` the run"
    out, unhashed = [], []
    for path, digest in vouched(folder, record).items():
        problem = what_changed(path, digest)
        if problem:
            out.append(_problem(store, "runs", path, problem, fix))
        elif not digest:
            unhashed.append(path.name)
    if unhashed:
        not_checked.append(
            f"{_rel(store, folder)}: the bytes of {', '.join(unhashed)} (its record holds no "
            "sha256 of them: written before store format 2)"
        )
    return out


def _bundles(store: Store, not_checked: list[str]) -> tuple[list[dict], int]:
    out, n, again = [], 0, "export the run again"
    for path in sorted((store.lab / BUNDLES).glob(f"*/{SUMS}")):
        n, bundle = n + 1, path.parent
        try:
            found = compare(bundle, listed(bundle))
        except BundleError as err:
            out.append(_problem(store, "bundle", path, str(err), again))
            continue
        for what, names in (
            ("changed since the export", found["changed"]),
            ("missing", found["missing"]),
        ):
            out += [_problem(store, "bundle", bundle / name, what, again) for name in names]
        out += [
            _problem(store, "bundle", bundle / name, "not listed in SHA256SUMS", again)
            for name in found["unlisted"]
        ]
        out += _anchored(store, bundle / "tunelab.json")
        if not recorded_export(store, bundle):
            problem = (
                "a bundle that no export record names: its export stopped (a kill) after the "
                "bundle was whole, before it was recorded"
            )
            fix = "remove the folder and export the run again (or `tunelab verify` it as it is)"
            out.append(_problem(store, "bundle", bundle, problem, fix))
    return out, n


def _anchored(store: Store, info_path: Path) -> list[dict]:
    """A bundle holds the log's head as it exported: that line must still be in the log."""
    anchor = _json(info_path).get("lab_log") if info_path.is_file() else None
    if not anchor or not anchor.get("head"):
        return []
    log = store.log_path
    raw = [line for line in log.read_bytes().split(b"\n") if line.strip()] if log.exists() else []
    at = anchor["lines"]
    if at <= len(raw) and line_hash(raw[at - 1]) == anchor["head"]:
        return []
    problem = (
        f"holds the log's head at line {at} ({anchor['head'][:12]}), which the lab's log no "
        "longer has: its past was rewritten after the export"
    )
    return [_problem(store, "bundle", info_path, problem, "restore the log from a backup")]


def _leftovers(store: Store, not_checked: list[str]) -> tuple[list[dict], int]:
    out = []
    for root in (store.root, store.lab / BUNDLES):
        if root.exists():
            for path in sorted(root.rglob(".*.tmp")):
                out.append(
                    _problem(
                        store,
                        "leftover",
                        path,
                        "a temporary left by a killed command",
                        "delete it (nothing reads it)",
                    )
                )
    killed = "delete it (nothing reads it)"
    runs = sorted(store.runs_dir.glob("*/checkpoint.new")) if store.runs_dir.exists() else []
    for path in runs:
        problem = (
            "a checkpoint being written when its run was killed (the run's last whole one, if "
            "any, is beside it)"
        )
        out.append(_problem(store, "leftover", path, problem, killed))
    for folder in (COMPARISONS, PLANS, GROUPS, NOISE):
        for path in sorted(store.path(folder).glob("*.json")):
            if not path.stat().st_size:  # reserved, never written
                problem = (
                    "an empty record: a number reserved by a command killed before it wrote it "
                    "(or writing it now)"
                )
                out.append(_problem(store, "leftover", path, problem, killed))
    return out, len(out)


def _json(path: Path) -> dict:
    """A record or manifest as far as it reads: one that does not is named once, by
    `_unreadable`, and the other checks pass over it."""
    try:
        value = read_json(path)
    except DamagedFile:
        return {}
    return value if isinstance(value, dict) else {}


def _problem(store: Store, check: str, path: Path, problem: str, fix: str) -> dict:
    return {"check": check, "path": _rel(store, path), "problem": problem, "fix": fix}


CHECKS = {
    "data_files": _data,
    "comparison_inputs": _comparisons,
    "run_folders": _runs,
    "bundles": _bundles,
    "leftovers": _leftovers,
}
"""Each check: the lab's store and a list to say what it could not check -> (its problems, how
many things it looked at)."""
