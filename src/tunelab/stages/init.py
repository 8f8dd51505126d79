"""`tunelab init`: write a commented starting spec for a task type, and check that it parses."""

from __future__ import annotations

import difflib
from importlib import resources
from pathlib import Path

from tunelab.core.errors import TunelabError
from tunelab.core.spec import SPEC_FILE, validate_spec
from tunelab.core.spec_yaml import load_yaml

TEMPLATES = (
    "classification",
    "multilabel",
    "image_classification",
    "extraction",
    "format",
    "pretrain",
)


class SpecExistsError(TunelabError, FileExistsError):
    """The lab already has a spec and `--force` was not given."""


def template(task: str) -> str:
    if task not in TEMPLATES:
        close = difflib.get_close_matches(task, TEMPLATES, n=1)
        meant = f"did you mean {close[0]!r}? " if close else ""
        raise TunelabError(f"no spec template for task {task!r}; {meant}known: {list(TEMPLATES)}")
    return resources.files("tunelab").joinpath(f"templates/{task}.yaml").read_text("utf-8")


def init_lab(lab: Path, task: str, force: bool = False) -> dict:
    text = template(task)
    path = Path(lab) / SPEC_FILE
    if path.exists() and not force:
        raise SpecExistsError(
            f"{path} exists; pass --force to overwrite it (each run keeps the spec it ran with)."
        )
    validate_spec(load_yaml(text), path, text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return {"spec": str(path), "task": task}
