"""The head features LP-FT fits its probe on, kept so a family of runs embeds its train split once.

`method.head_init: probe` reads the input of the head's last layer on every train example
(`head_init.head_features`): a full forward pass over the train split, the same in every run
that differs only in what training does later (the seeds of `tunelab noise`, an `ablate` grid
over the learning rate or the steps). The features are a function of

- the base: its weights, config and tokenizer (`identity`, less where the folder is);
- how the run builds the model: the method's type and the modules it saves (a LoRA's B starts
  at zero, so it adds exactly nothing yet, whatever its rank or targets);
- the examples as the model receives them, in order (token ids, or an image's pixels);
- the batch size and the padding id (they set the kernels' shapes, and so the last bits);
- the layer read, the model's dtype, the device type, and torch's and transformers' versions.

The key is the sha256 of all of them; a file under it holds what the same code computed on the
same inputs, so a run that finds it fits the same probe. A file that cannot be read is a miss
(computed again and rewritten); every write is atomic.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from tunelab.core.files import atomic_file
from tunelab.core.layout import CACHE

FOLDER = "head-features"
SUFFIX = ".npy"


@dataclass(frozen=True)
class FeatureCache:
    """Where the features are kept (`folder`) and what the stage knows of the model they come
    from (`context`: the base's identity and the method's parts that shape the forward pass)."""

    folder: Path
    context: dict

    def key(
        self,
        model: torch.nn.Module,
        layer: str,
        examples: list,
        batch_size: int,
        pad_id: int,
        device: torch.device,
    ) -> str:
        import transformers

        parameter = next(model.parameters())
        about = {
            **self.context,
            "layer": layer,
            "batch_size": batch_size,
            "pad_id": pad_id,
            "dtype": str(parameter.dtype),
            "device": torch.device(device).type,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        }
        digest = hashlib.sha256(json.dumps(about, sort_keys=True, default=str).encode())
        for example in examples:
            inputs = _inputs(example)
            digest.update(f"{inputs.dtype}{inputs.shape}".encode())
            digest.update(inputs.tobytes())
        return digest.hexdigest()

    def load(self, key: str, rows: int) -> np.ndarray | None:
        """The features kept under `key`, or None (none kept, unreadable, or not `rows` rows)."""
        path = self.folder / f"{key}{SUFFIX}"
        try:
            x = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            return None
        return x if x.ndim == 2 and x.shape[0] == rows else None

    def save(self, key: str, x: np.ndarray) -> None:
        with atomic_file(self.folder / f"{key}{SUFFIX}") as fh:
            np.save(fh, x, allow_pickle=False)


def _inputs(example) -> np.ndarray:
    """What the model receives of one example: a text's token ids or an image's pixels."""
    pixels = getattr(example, "pixel_values", None)
    if pixels is not None:
        return pixels.detach().cpu().contiguous().numpy()
    return np.asarray(example.input_ids, dtype=np.int64)


def run_cache(store_root: Path, spec, base: dict) -> FeatureCache:
    """The cache of a run's head features in the lab's store (`.tunelab/cache/head-features/`):
    keyed on the base's `identity` (`base`; where its folder is does not count), the model
    section less its path, and the method's type and saved modules."""
    model = spec.model.model_dump(mode="json", exclude={"path"})
    context = {
        "base": {k: v for k, v in base.items() if k != "path"},
        "model": model,
        "method": spec.method.type,
        "modules_to_save": getattr(spec.method, "modules_to_save", None),
    }
    return FeatureCache(Path(store_root) / CACHE / FOLDER, context)
