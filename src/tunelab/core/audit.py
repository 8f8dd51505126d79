"""Is the lab's past as its event log wrote it? `Store.audit` and `Store.require_intact_log`.

Every record of store format 2 is saved with an event that holds its sha256 (`Store.save`), so
a record edited afterwards no longer matches its last event, one deleted is missing, and one in
no event at all (`core.unlogged`) came with a log cut short or deleted, or by hand. `compare`,
`final` and `export` refuse to judge from such a lab; `fsck` names every problem and `fsck
--repair --reason` accepts them as they are, recorded.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

from tunelab.core.chain import verify
from tunelab.core.digest import sha256_file
from tunelab.core.files import locked
from tunelab.core.unlogged import unlogged


def audit(store) -> dict:
    """The log's chain (`core.chain.verify`), `records`: each record whose file no longer has
    the sha256 its last event gave it, or is gone (`{record, line, problem}`), and `hashed`:
    the records some event vouches for. Read under the log's lock, so a record being saved is
    seen whole with its event."""
    log = store.log_path
    with locked(log, shared=True) if log.exists() else nullcontext():
        state = verify(log)
        last = vouching(store)
        problems = []
        for shown, (number, digest) in sorted(last.items()):
            path = store.lab / shown
            if not path.is_file():
                problems.append({"record": shown, "line": number, "problem": "missing"})
            elif sha256_file(path) != digest:
                problem = f"changed after line {number} of the log wrote it"
                problems.append({"record": shown, "line": number, "problem": problem})
    return state | {"records": problems, "records_hashed": len(last), "hashed": set(last)}


def require_intact_log(store, command: str) -> dict:
    """The chain's state; a StoreError naming every broken line, every edited or missing
    record and every record in no event, for the commands that judge from the lab."""
    from tunelab.core.store import StoreError

    state = audit(store)
    found = [f"line {p['line']} {p['problem']}" for p in state["problems"]]
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
