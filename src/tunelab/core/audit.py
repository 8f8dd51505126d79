"""Is the lab's past as its event log wrote it? `Store.audit` and `Store.require_intact_log`.

Every record of store format 2 is saved with an event that holds its sha256 (`Store.save`), so
a record edited afterwards no longer matches its last event, one deleted is missing, and one in
no event at all (`core.unlogged`) came with a log cut short or deleted, or by hand. `compare`,
`final` and `export` refuse to judge from such a lab; `fsck` names every problem and `fsck
--repair --reason` accepts them as they are, recorded. One is no edit: a save a kill cut between
its line and its rename leaves the record vouched for in its staged file beside the path, and
`audit` finishes that rename (`finish_staged`) before it judges.
"""

from __future__ import annotations

import errno
import glob
import os
from contextlib import nullcontext
from pathlib import Path

from tunelab.core.chain import verify
from tunelab.core.digest import sha256_file
from tunelab.core.files import _fsync, locked
from tunelab.core.layout import chained_from
from tunelab.core.unlogged import unlogged


def audit(store) -> dict:
    """The log's chain (`core.chain.verify`), `records`: each record whose file no longer has
    the sha256 its last event gave it, or is gone (`{record, line, problem}`), and `hashed`:
    the records some event vouches for. Read under the log's lock, so a record being saved is
    seen whole with its event. A save a kill cut between its line and its rename is finished
    first (`finish_staged`), and `finished` names those records."""
    log = store.log_path
    with locked(log, shared=True) if log.exists() else nullcontext():
        state = verify(log, chained_from(store.format))
        last = vouching(store)
        problems = _mismatched(store, last)
    finished = finish_staged(store, problems) if problems else []
    if finished:
        problems = [p for p in problems if p["record"] not in finished]
    return state | {
        "records": problems,
        "records_hashed": len(last),
        "hashed": set(last),
        "finished": finished,
    }


def _mismatched(store, last: dict[str, tuple[int, str]]) -> list[dict]:
    problems = []
    for shown, (number, digest) in sorted(last.items()):
        path = store.lab / shown
        if not path.is_file():
            problems.append({"record": shown, "line": number, "problem": "missing"})
        elif sha256_file(path) != digest:
            problem = f"changed after line {number} of the log wrote it"
            problems.append({"record": shown, "line": number, "problem": problem})
    return problems


def finish_staged(store, problems: list[dict]) -> list[str]:
    """Finish the saves a kill cut between their log line and their rename (`Store.save`
    stages a record beside its path, logs its sha256, then renames it into place): a record
    missing, emptied or older than its line, beside a staged file whose sha256 is the line's,
    is that file, renamed into place now. Under the log's lock, as the save would have done
    it (a save in progress holds the lock: its staged file is never taken). Returns the
    records finished; none where the lab cannot be written (an archived copy)."""
    finished = []
    try:
        with locked(store.log_path):
            last = vouching(store)
            for problem in problems:
                path = store.lab / problem["record"]
                digest = last.get(problem["record"], (0, None))[1]
                if digest is None or (path.is_file() and sha256_file(path) == digest):
                    continue
                staged = sorted(path.parent.glob(f".{glob.escape(path.name)}.*.tmp"))
                match = next((f for f in staged if sha256_file(f) == digest), None)
                if match is not None:
                    os.replace(match, path)
                    _fsync(path.parent)
                    finished.append(problem["record"])
    except OSError as err:
        if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
    return finished


def require_intact_log(store, command: str) -> dict:
    """The chain's state; a StoreError naming every broken line, every edited or missing
    record and every record in no event, for the commands that judge from the lab."""
    from tunelab.core.store import StoreError

    state = audit(store)
    lines: dict[str, list[int]] = {}  # a log stripped of its links: one problem, many lines
    for p in state["problems"]:
        lines.setdefault(p["problem"], []).append(p["line"])
    found = [f"{_numbered(at)} {problem}" for problem, at in lines.items()]
    found += [f"{p['record']} {p['problem']}" for p in state["records"]]
    found += [
        f"{path.relative_to(store.lab)} in no event of the log"
        for path in unlogged(store.root, store.lab, state["hashed"])
    ]
    if found:
        what = (
            "the event log changed after it was written"
            if state["problems"]
            else "records are not as the log wrote them"
        )
        raise StoreError(
            f"{store.log_path}: {what} ({'; '.join(found[:5])}). `tunelab {command}` does not "
            "work from a lab whose past was edited. `tunelab fsck` lists every problem; "
            'restore from a backup, or mark the break with `tunelab fsck --repair --reason "why"` '
            "(recorded in the log)."
        )
    return state


def _numbered(at: list[int]) -> str:
    """`line 3`, or `lines 1, 2, 3, 4, 5 and 3 more`."""
    if len(at) == 1:
        return f"line {at[0]}"
    more = f" and {len(at) - 5} more" if len(at) > 5 else ""
    return f"lines {', '.join(map(str, at[:5]))}{more}"


def vouching(store) -> dict[str, tuple[int, str]]:
    """Each record some event vouches for (its path relative to the lab), with the line and
    sha256 of the last such event: the event that saved it, or an `fsck --repair` that
    accepted it as it was. Reads the log without its lock (`audit` and `Store.save` hold it)."""
    last: dict[str, tuple[int, str]] = {}
    for number, event in store.numbered_events():
        if event.get("record_sha256"):
            last[event["record"]] = (number, event["record_sha256"])
        for shown, digest in (event.get("accepted") or {}).items():  # fsck --repair
            last[shown] = (number, digest)
    return {shown: at for shown, at in last.items() if at[1]}


def written_in_format_2(store) -> bool:
    """Whether a format-2 tunelab wrote the log: its events hash their records."""
    return any(event.get("record_sha256") for _, event in store.numbered_events())


def require_as_logged(store, path: Path, who: str = "tunelab") -> None:
    """A record, before `who` (a command) builds on it or writes it again: as the last event that
    vouches for it wrote it. Otherwise a StoreError names the file and the line, since writing
    it again would make the log vouch for the edit. A record no event vouches for (written
    before the log held sha256s) passes; `fsck` names those."""
    from tunelab.core.store import StoreError

    if not path.is_file():
        return
    shown = str(path.relative_to(store.lab))
    found = vouching(store).get(shown)
    if found is None or sha256_file(path) == found[1]:
        return
    raise StoreError(
        f"{path}: changed after line {found[0]} of the log ({store.log_path}) wrote it, so "
        f"it is not the record the lab vouches for; {who} does not build on it or write it "
        "again (the log would then vouch for the edit). `tunelab fsck` lists every "
        "such change; restore the file from a backup, or accept it with `tunelab fsck --repair "
        '--reason "why"` (recorded in the log).'
    )
