"""Every name in a lab's store (`.tunelab/`), and the store's format version.

Layout (format 2)::

    .tunelab/
      format.json                   the store format this lab is written in (STORE_FORMAT)
      events.jsonl                  append-only, hash-chained log of what every command did
      data/CURRENT                  id of the newest data version
      data/<version>/               manifest.json, report.json, quarantine.jsonl,
                                    duplicates.jsonl, train/validation/test.jsonl (test sealed)
      runs/rNNN-<name>/             record.json, predictions.jsonl, weights/, heartbeat.json,
                                    checkpoint/: one folder per run, never deleted
      comparisons/cNNN.json         `tunelab compare`
      groups/gNNN.json              replicate groups (`--seeds N`, `tunelab noise`)
      noise/nNNN.json               measured noise floors (`tunelab noise`)
      plans/pNNN.json               rental plans (`tunelab plan`)
      finals/<n>-<run>.json         openings of the sealed test split (`tunelab final`)
      exports/<n>-<run>.json        exports and their verification (`tunelab export`, `verify`)
      checks/<version>-<key>.json   preflights (`tunelab check`)
      sizing/<version>-<key>.json   memory plans (`tunelab size`), and sizing/scratch/
      inspect/<version>/            contact sheets of an image lab (`tunelab inspect`)
      cache/                        derived files (a GGUF's dequantized copy, trained BPEs,
                                    remote-code modules, LP-FT's head features), rebuilt
                                    when missing
    bundles/<run>/                  beside the store: exported bundles (`tunelab export`)

Numbered records are ordered by their number (`c2` before `c10`, `2-r…` before `10-r…`), and
every number is reserved the same way (`Store.reserve`): under the folder's lock, one past the
highest taken, created exclusively.

Format history (a lab records its format in `format.json`; a tunelab refuses a newer one):

1. Labs written before the format was recorded: read as they are. The log's chain starts at
   their first new event, and their records carry no hash in the log (not checked).
2. `format.json`; every record's sha256 in the event that wrote it; a completed run's weights
   and predictions hashed in its record.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

STORE_FORMAT = 2
"""The store format this tunelab writes (see the history above)."""

STORE_DIR = ".tunelab"
FORMAT = "format.json"
EVENTS = "events.jsonl"
DATA = "data"
CURRENT = "CURRENT"
MANIFEST = "manifest.json"
RUNS = "runs"
RECORD = "record.json"
PREDICTIONS = "predictions.jsonl"
WEIGHTS = "weights"
HEARTBEAT = "heartbeat.json"
HISTORY = "history.jsonl"
"""A run's loss history, a line a step, appended as it trains (`training.loop.HistoryFile`)."""
COMPARISONS = "comparisons"
GROUPS = "groups"
NOISE = "noise"
PLANS = "plans"
FINALS = "finals"
FINAL_PREDICTIONS = ".predictions.jsonl"
"""A final's test predictions, beside its record: `N-RUN.predictions.jsonl`."""
EXPORTS = "exports"
CHECKS = "checks"
SIZING = "sizing"
SIZING_SCRATCH = f"{SIZING}/scratch"
"""Where `tunelab size` writes a scratch model and its probes' results, removed after."""
CACHE = "cache"
INSPECT = "inspect"
BUNDLES = "bundles"
LOCK = ".lock"
"""A numbered folder's lock, held while a number is taken (`Store.reserve`)."""
TRACK_LOCK = ".track.lock"
"""Held by `track` while it writes the lab into MLflow: a second `track` of the lab waits (both
would find a run missing and create it, and two stores made at once lost one's runs)."""
FINALS_LOCK = ".finals.lock"
"""Held by `final` while it reads the access log and logs its opening (in the store's root, so
a refused final leaves no `finals/` folder)."""

_NUMBER = re.compile(r"[a-z]*(\d+)")


def number_of(path: Path) -> int:
    """The number a record's name starts with (`c012` -> 12, `3-r004-lora` -> 3); -1 if none."""
    found = _NUMBER.match(path.stem)
    return int(found.group(1)) if found else -1


VERSION_ID = re.compile(r"[0-9A-Za-z_-]+")
"""What a data version's id may be: a folder's name, no path (`data.version` writes the first
12 hex digits of its content's sha256); CURRENT holding `../runs/r003` had been read as one."""


def chained_from(found: dict) -> int | None:
    """The first line of the event log that must carry its link (`core.chain`), from the
    store's format record: 1 in a lab begun in format 2, `since_line` in one upgraded from
    format 1, None for a format-1 lab (any line may be old)."""
    return found.get("since_line", 1) if found["format"] >= 2 else None


def begun_in_format_2(found: dict) -> bool:
    """A lab whose every record was written in format 2 (so carries `store_format`)."""
    return found["format"] >= 2 and "since_line" not in found


def read_format(root: Path) -> dict:
    """The store's `format.json`: `{"format": N, ...}`; format 1 for a store written before
    the format was recorded (or no store yet)."""
    path = root / FORMAT
    if not path.is_file():
        return {"format": 1}
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(found.get("format"), int):
            raise ValueError("no integer 'format'")
    except (ValueError, AttributeError) as err:
        from tunelab.core.store import StoreError

        raise StoreError(
            f"{path}: not a store format record ({err}); restore it from a backup, or write "
            f'{{"format": {STORE_FORMAT}}} if this lab was written by this tunelab.'
        ) from None
    return found
