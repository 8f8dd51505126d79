"""The folder `tunelab size` loads its model from in each fresh probe process: the base's own
folder, or for a model built from scratch, its first weights saved where the probes can read
them (drawn from the spec's seed, as `run` draws them), removed when sizing ends."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tunelab.core.lab import Lab
from tunelab.modeling.model import resolve_path


@contextmanager
def model_folder(lab: Lab, data_version: str, scratch: Path) -> Iterator[Path]:
    """The model folder of `lab`'s spec; a scratch model's is written under `scratch` (the
    store's sizing scratch) with `save_pretrained` and taken away after, whatever happens."""
    spec = lab.spec.model
    if not spec.scratch:
        yield resolve_path(spec, lab.path)
        return
    from tunelab.modeling.scratch_identity import scratch_model

    folder = scratch / f"scratch-model-{os.getpid()}"
    try:
        model = scratch_model(spec, lab.path, lab.spec.training.seed, data_version)
        model.save_pretrained(folder)
        del model
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
