"""A run's scores on its forgetting sets: what the fine-tune cost on text it never trained on.

Every guardrail `on` a text (`data/guard_sets.py`) is measured at the end of each run and of
the zero-shot baseline with the pretrain task's document scorer (`evaluate_lm`): each
document's summed NLL as `[EOS] + its tokens`, in windows of `model.max_length` tokens, so
every run of a data version is scored on the same documents the same way and `compare` pairs
them document by document (bits per byte, loss). Each set's scored documents go into the
run's folder (`guard/<name>.jsonl`); the record keeps the file, its sha256 and the metrics.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tunelab.core.digest import sha256_file
from tunelab.core.spec import Spec
from tunelab.core.store import Store, write_jsonl
from tunelab.data.guard_sets import FOLDER, guard_paths, stored_name, stored_rows
from tunelab.modeling.render import Renderer
from tunelab.training.evaluate_lm import score_documents


def score_guard_sets(
    model: torch.nn.Module,
    renderer: Renderer,
    spec: Spec,
    store: Store,
    version: str,
    run_dir: Path,
    device: torch.device,
) -> dict[str, dict]:
    """Score the model on each forgetting set of the spec and write the scored documents;
    returns, per set, the record's entry (`file`, `sha256`, `metrics`). None of them: {}."""
    out = {}
    for on in guard_paths(spec):
        rows = stored_rows(store, version, on)
        predictions, metrics = score_documents(
            model,
            renderer.tokenizer,
            rows,
            renderer.max_length,
            spec.evaluation.batch_size,
            device,
            renderer.pad_id,
        )
        file = f"{FOLDER}/{stored_name(on)}.jsonl"
        (run_dir / FOLDER).mkdir(exist_ok=True)
        write_jsonl(run_dir / file, predictions)
        metrics.pop("per_source", None)
        out[on] = {"file": file, "sha256": sha256_file(run_dir / file), "metrics": metrics}
    return out
