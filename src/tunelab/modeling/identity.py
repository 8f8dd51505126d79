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
        sha = _sha256(source)
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
    combined, each = _weights(files)
    others = [path / "config.json", *(path / n for n in TOKENIZER_FILES)]
    each |= {f.name: _sha256(f) for f in others if f.is_file()}
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


_HASHED: dict[tuple, str] = {}
"""sha256 of files this process hashed, by (path, size, mtime, inode): a command that checks the
base against a run's record and then binds a bundle to it reads its gigabytes once."""


def _signature(path: Path) -> tuple:
    stat = path.stat()
    return (str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)


def _sha256(path: Path) -> str:
    key = _signature(path)
    if key not in _HASHED:
        _HASHED[key] = sha256_file(path)
    return _HASHED[key]


def _weights(files: list[Path]) -> tuple[str, dict[str, str]]:
    """`digest.sha256_files` of the weight files (one read of each), remembered."""
    key = tuple(_signature(f) for f in files)
    if key not in _HASHED:
        combined, each = sha256_files(files)
        _HASHED[key] = combined
        _HASHED.update({_signature(f): each[f.name] for f in files})
    return _HASHED[key], {f.name: _HASHED[_signature(f)] for f in files}


def changed_files(recorded: dict, found: dict) -> list[str]:
    """The files of a base whose sha256 differs from a record's (or that one of them lacks: a
    weight file added or gone); a file the record did not hash (an older tunelab's) is not
    named."""
    before, now = recorded.get("files") or {}, found.get("files") or {}
    if not before:  # a record that kept the combined weights' digest alone
        return []
    weights = set(recorded.get("weight_files") or ()) | set(found.get("weight_files") or ())
    names = sorted(set(before) | (set(now) & weights))
    return [n for n in names if before.get(n) != now.get(n)]


def require_recorded_base(spec: ModelSpec, lab: Path, record: dict) -> dict | None:
    """The base at `spec`'s path (a run's recorded spec, or `--base`) is the one `record`'s run
    trained on: its weights, config and tokenizer hash as the record holds them. A changed one
    had gone on to `final`, `resume` and `export`, and the bundle, bound to the changed base,
    then verified. Returns the identity found (None for a scratch model, whose base
    `export` checks itself, or a record that kept none)."""
    from tunelab.core.errors import TunelabError

    recorded = record.get("base_model") or {}
    if spec.scratch or not recorded.get("weights_sha256"):
        return None
    found = identity(spec, lab)
    changed = changed_files(recorded, found)
    if found["weights_sha256"] == recorded["weights_sha256"] and not changed:
        return found
    listed = ", ".join(changed[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6 else "")
    raise TunelabError(
        f"{record['id']} was trained on a base model whose weights hash to "
        f"{recorded['weights_sha256'][:16]}… ({recorded.get('path')}), but the base at "
        f"{found['path']} is not that model: {listed or 'its weight files'} changed since "
        "(weights sha256 now "
        f"{found['weights_sha256'][:16]}…). Put back the base it trained on, or give its place "
        "with --base PATH (`final`, `export`); a run on the changed base is a new run."
    )


GENERIC_NAMES = frozenset({"model", "models", "weights", "base", "checkpoint"})


def _name(path: Path) -> str:
    """The folder's name, with its parent's when the folder itself is called `model`."""
    return f"{path.parent.name}/{path.name}" if path.name in GENERIC_NAMES else path.name
