"""The two kinds of failure a user meets, told apart by class, never by guessing.

- `TunelabError` and its subclasses: the user's input cannot be used (a spec field, a data
  file, a run id, a refusal such as the one-change rule). The CLI prints its one line and exits
  2. It is a `ValueError`, so library callers that catch bad input as `ValueError` still do.
- Anything else that escapes a stage is a bug or an environment failure: the CLI exits 1 with a
  one-line summary, and prints the traceback with `--debug` (or `TUNELAB_DEBUG=1`).

`TrainingInterrupted` is neither: a stop on request (Ctrl-C, SIGTERM), exit 130.
"""

from __future__ import annotations

from pathlib import Path


class TunelabError(ValueError):
    """Input the user can fix; the message names the file, line or field and what to do."""


class TrainingInterrupted(Exception):
    """Training stopped on request (Ctrl-C, SIGTERM) after a step, with a checkpoint saved."""

    def __init__(self, step: int, checkpoint: Path | None):
        super().__init__(
            f"stopped after step {step}" + (f"; checkpoint {checkpoint}" if checkpoint else "")
        )
        self.step, self.checkpoint = step, checkpoint
