"""`tunelab.load_bundle`: a bundle's model on the exact base it was trained on, or an error.

PEFT loads an adapter onto any base of the right shape without a word, so a same-shaped but
different base (another checkpoint of the same architecture) gives silently wrong outputs.
This loader hashes the base it is given and refuses one whose weights differ from the base
recorded in the bundle, naming both.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from tunelab.core.errors import TunelabError

BUNDLE_FILE = "tunelab.json"


class WrongBaseError(TunelabError):
    """The base given is not the one the bundle was trained on."""


def read_bundle(bundle: Path) -> dict:
    path = Path(bundle) / BUNDLE_FILE
    if not path.exists():
        raise TunelabError(f"{bundle}: no {BUNDLE_FILE}; this is not a tunelab bundle.")
    return json.loads(path.read_text(encoding="utf-8"))


def check_base(info: dict, base: Path) -> dict:
    """The identity of `base`, checked against the bundle's; WrongBaseError names both."""
    from tunelab.core.spec import ModelSpec
    from tunelab.modeling.model import identity

    recorded = info["base_model"]
    base = Path(base).resolve()
    found = identity(ModelSpec(**(info["spec"]["model"] | {"path": str(base)})), base.parent)
    if found["weights_sha256"] != recorded["weights_sha256"]:
        raise WrongBaseError(
            f"the bundle was trained on {recorded['name']} ({recorded['path']}, weights sha256 "
            f"{recorded['weights_sha256']}), but {found['path']} has weights sha256 "
            f"{found['weights_sha256']}. Give the exact base with --base / base=."
        )
    return found


def load_bundle(bundle, base=None, device: str = "cpu"):
    """(model, tokenizer, info): the bundle's model on `base` (default: the recorded base
    path), checked first. Classifiers come back with their labels, causal LMs ready to
    generate; both in eval mode on `device`."""
    import torch
    from transformers import AutoTokenizer

    from tunelab.core.spec import ModelSpec
    from tunelab.modeling.model import load_trained

    bundle = Path(bundle)
    info = read_bundle(bundle)
    base = Path(base or info["base_model"]["path"])
    check_base(info, base)
    spec = ModelSpec(**(info["spec"]["model"] | {"path": str(base.resolve())}))
    labels = info["labels"] if info["kind"] == "encoder" else None
    with tempfile.TemporaryDirectory(prefix="tunelab-bundle-") as lab:  # a GGUF base's copy
        model = load_trained(spec, Path(lab), bundle, torch.device(device), labels)
    tokenizer = AutoTokenizer.from_pretrained(bundle)
    return model, tokenizer, info
