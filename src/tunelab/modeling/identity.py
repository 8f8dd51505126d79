"""The identity of a pretrained base: the name, revision and sha256 digests an adapter is bound
to (a scratch model's: `modeling.scratch_identity`)."""

from __future__ import annotations

from pathlib import Path

from tunelab.core.digest import sha256_file, sha256_files
from tunelab.core.spec import ModelSpec
from tunelab.modeling.base_folder import resolve_path
from tunelab.modeling.hub_cache import hub_snapshot, locate
from tunelab.modeling.safety import WEIGHT_SUFFIXES, remote_code

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "tokenizer.model",
    "chat_template.jinja",
    "added_tokens.json",
    "preprocessor_config.json",  # an image classifier's processor
)


def identity(
    spec: ModelSpec,
    lab: Path,
    sequence_length: int | None = None,
    data_version: str | None = None,
) -> dict:
    """Name, revision and sha256 digests: the base an adapter is bound to (for a scratch
    model: `modeling.scratch_identity`, FLOPs per token at `sequence_length`). `weights_sha256`
    covers the weight files together; `files` holds the sha256 of each weight file, of the
    config and of the tokenizer files (only `.safetensors` weights count: pickles are refused).
    With `trust_remote_code`, `remote_code` holds the sha256 of each Python file the folder lets
    run. For a GGUF base the identity is the GGUF file's hash."""
    if spec.scratch:
        from tunelab.modeling.scratch_identity import scratch_identity

        return scratch_identity(spec, lab, sequence_length, data_version)
    source = locate(spec, lab)
    if source.suffix == ".gguf":
        sha = sha256_file(source)
        return {
            "path": str(source),
            "name": source.name,
            "revision": spec.revision,
            "weights_sha256": sha,
            "weight_files": [source.name],
            "files": {source.name: sha},
            "format": "gguf",
        }
    path = resolve_path(spec, lab)
    files = sorted(p for p in path.iterdir() if p.suffix in WEIGHT_SUFFIXES)
    combined, each = sha256_files(files)
    others = [path / "config.json", *(path / n for n in TOKENIZER_FILES)]
    each |= {f.name: sha256_file(f) for f in others if f.is_file()}
    snapshot = hub_snapshot(path)
    found = {
        "path": str(path),
        "name": snapshot[0] if snapshot else _name(path),
        "revision": spec.revision or (snapshot[1] if snapshot else None),
        "weights_sha256": combined,
        "weight_files": [f.name for f in files],
        "files": dict(sorted(each.items())),
    }
    if spec.trust_remote_code:
        found["remote_code"] = remote_code(path)
    return found


GENERIC_NAMES = frozenset({"model", "models", "weights", "base", "checkpoint"})


def _name(path: Path) -> str:
    """The folder's name, with its parent's when the folder itself is called `model`."""
    return f"{path.parent.name}/{path.name}" if path.name in GENERIC_NAMES else path.name
