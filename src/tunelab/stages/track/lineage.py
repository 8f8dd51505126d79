"""Which copy of a lab an experiment was last tracked from: the log line it had reached.

`tunelab.lab_id` (the log's first line) stays when a lab is copied, so a copy that went its
own way and the original both pass it; tracked in turn into one experiment, each rolled the
other's run states back and their newer runs sat side by side under one id. The experiment
therefore also keeps how many lines the tracked lab's log had and the sha256 of the last one
(`tunelab.log_lines`, `tunelab.log_head`): a lab whose log holds that very line at that place
has only gone on from it, and may be tracked; any other is refused, naming the line."""

from __future__ import annotations

from tunelab.core.chain import line_hash
from tunelab.core.store import Store

LINES, HEAD = "tunelab.log_lines", "tunelab.log_head"


def log_mark(store: Store) -> dict[str, str]:
    """The tags that say how far this lab's log has gone: its lines and its last line's hash."""
    lines = _lines(store)
    return {LINES: str(len(lines)), HEAD: line_hash(lines[-1]) if lines else ""}


def diverged(store: Store, tags: dict) -> str | None:
    """Why this lab is not the one the experiment was last tracked from, or an older copy of
    it; None when its log holds the tracked line where it was (or nothing was marked)."""
    n, head = tags.get(LINES), tags.get(HEAD)
    if not n or not head:
        return None
    lines = _lines(store)
    at = int(n)
    if at <= len(lines) and line_hash(lines[at - 1]) == head:
        return None
    return (
        f"it was last tracked from a lab whose log line {at} has sha256 {head[:12]}…, a line "
        f"this lab's log ({len(lines)} lines) does not hold there: a copy that went its own way "
        "(or an older copy) would roll the tracked runs' states back"
    )


def _lines(store: Store) -> list[bytes]:
    if not store.log_path.is_file():
        return []
    return [line for line in store.log_path.read_bytes().splitlines() if line.strip()]
