"""`verify` opens nothing pickled that a bundle's sender put in it, its merged/ folder included:
tunelab loads weights from safetensors only."""

from __future__ import annotations

import hashlib

import torch
from safetensors.torch import load_file

from conftest import copy_of, tl


def test_a_merged_folder_whose_weights_are_only_a_pickle_is_not_opened(exported, tmp_path, capsys):
    """A sender replaced merged/model.safetensors with the same weights pickled and listed it:
    verify handed the pickle to transformers (torch's own weights_only default was all that
    stood between it and the code a pickle can run)."""
    bundle = copy_of(exported[1], tmp_path)
    merged = bundle / "merged"
    torch.save(load_file(str(merged / "model.safetensors")), merged / "pytorch_model.bin")
    (merged / "model.safetensors").unlink()
    sums = bundle / "SHA256SUMS"
    lines = [
        line for line in sums.read_text().splitlines() if "merged/model.safetensors" not in line
    ]
    digest = hashlib.sha256((merged / "pytorch_model.bin").read_bytes()).hexdigest()
    sums.write_text("\n".join([*lines, f"{digest}  merged/pytorch_model.bin"]) + "\n")
    code, result = tl(capsys, "verify", str(bundle))
    items = {i["name"]: i for i in result["items"]}
    assert code == 1 and items["files"]["passed"], result  # listed as the sender listed it
    assert not items["merged"]["passed"]
    assert (
        "(pytorch_model.bin: pickles): tunelab opens weights from safetensors only"
        in (items["merged"]["detail"])
    )
