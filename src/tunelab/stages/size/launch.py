"""Where a sizing probe's process gets its arguments and leaves its result: one folder under
the lab's scratch (`.tunelab/sizing/scratch`), removed when the probe ends, for the one-process
probe (`measure.run_probe`) and the torchrun ranks (`processes.run_rank_probes`) alike."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunelab.core.env import child_env
from tunelab.core.errors import TunelabError

MAX_ARGUMENT = 64_000
"""The longest payload passed as an argument; a longer one goes in a file (`@FILE`): one
argument may not exceed 128 KiB (Linux's MAX_ARG_STRLEN)."""


class SizingError(TunelabError):
    """A probe failed for a reason other than running out of memory."""


@dataclass(frozen=True)
class ProbeFolder:
    out: Path
    """Where the probe writes its result (a rank of several: `out` + `.rankN`)."""
    payload: str
    """Its arguments: JSON, or `@FILE` where that is too long for one argument."""
    env: dict[str, str]
    """The child's environment: transformers' copies of remote code kept in the folder."""


@contextmanager
def probe_folder(args: dict[str, Any], scratch: Path | None, prefix: str) -> Iterator[ProbeFolder]:
    """A temporary folder under `scratch` (a system one without it: a benchmark outside any
    lab) holding a probe's arguments and result, removed when the block ends."""
    if scratch is not None:
        scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=prefix, dir=scratch) as tmp:
        out = Path(tmp) / "result.json"
        payload = json.dumps(args | {"out": str(out)})
        if len(payload) > MAX_ARGUMENT:
            (Path(tmp) / "args.json").write_text(payload)
            payload = "@" + str(Path(tmp) / "args.json")
        env = child_env() | {"HF_MODULES_CACHE": str(Path(tmp) / "hf-modules")}
        yield ProbeFolder(out, payload, env)
