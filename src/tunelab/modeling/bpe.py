"""A scratch model's tokenizer: the folder `model.tokenizer` names, or a byte-level BPE trained
with `tokenizers` on the train split of the lab's current data version.

The trained tokenizer is cached in the store under a key made of its settings and the train
split's sha256, so every run on that split uses the same one (a recorded run asks for its own
data version's, which need not be the current one); its settings and the sha256 of
its `tokenizer.json` are part of the scratch model's identity (`tokenizer_identity`).
Special tokens: `<|endoftext|>` (EOS and BOS: it separates packed documents) and `<|pad|>`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from tunelab.core.digest import sha256_file
from tunelab.core.errors import TunelabError
from tunelab.core.scratch import Bpe
from tunelab.core.spec_paths import spec_path
from tunelab.core.store import STORE_DIR, Store, atomic_dir

EOS, PAD = "<|endoftext|>", "<|pad|>"
TRAINER = "tokenizers ByteLevel BPE (add_prefix_space=false), specials <|endoftext|>, <|pad|>"


def train_bpe(texts: list[str], bpe: Bpe) -> PreTrainedTokenizerFast:
    """A byte-level BPE learned from `texts` (every byte is in the vocabulary, so any text
    encodes and decodes back exactly)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=bpe.vocab_size,
        min_frequency=bpe.min_frequency,
        special_tokens=[EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS, bos_token=EOS, pad_token=PAD
    )


def _settings(bpe: Bpe, train_sha256: str) -> dict:
    return {"trainer": TRAINER, **bpe.model_dump(), "train_split_sha256": train_sha256}


def trained_tokenizer(
    bpe: Bpe, lab: Path, data_version: str | None = None
) -> tuple[PreTrainedTokenizerBase, Path, dict]:
    """The BPE of `data_version`'s train split (default: the current version's), trained once
    and then cached, its folder and its settings."""
    store = Store(lab)
    version = data_version or store.current_data()
    manifest = store.data_manifest(version)
    train_sha = (manifest.get("split_sha256") or {}).get("train")
    if train_sha is None:
        raise TunelabError(
            f"data version {version} records no train split sha256 (made by an older "
            "tunelab): run `tunelab data` again"
        )
    settings = _settings(bpe, train_sha)
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    folder = lab / STORE_DIR / "cache" / "tokenizers" / key
    if not (folder / "tokenizer.json").exists():
        texts = [row["text"] for row in store.read_split(version, "train")]
        tokenizer = train_bpe(texts, bpe)
        with atomic_dir(folder, replace=True) as out:
            tokenizer.save_pretrained(out)
            written = {p.name: sha256_file(p) for p in tokenizer_files(out)}
            kept = settings | {"files_sha256": written}  # what `_unchanged` reads back
            (out / "settings.json").write_text(json.dumps(kept, indent=2), encoding="utf-8")
    _unchanged(folder)
    return AutoTokenizer.from_pretrained(folder), folder, settings


def _unchanged(folder: Path) -> None:
    """Refuse a cached BPE whose files are not as they were written (an edit, a damaged disk):
    every run on this split would tokenize with it, under the same spec, and say nothing. A
    folder cached before the hashes were kept has none to check."""
    try:
        kept = json.loads((folder / "settings.json").read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        kept = None
    if kept is None:
        changed = ["settings.json unreadable"]
    elif "files_sha256" not in kept:  # cached before the hashes were kept: nothing to check
        return
    else:
        written = kept["files_sha256"]
        now = {p.name: sha256_file(p) for p in tokenizer_files(folder)}
        changed = sorted(n for n in written.keys() | now.keys() if written.get(n) != now.get(n))
    if changed:
        raise TunelabError(
            f"{folder}: the BPE cached there is not as it was trained ({', '.join(changed)} "
            "changed): a cache the lab can make again, so delete that folder and the next "
            "command trains it anew (the runs that used it recorded its files' sha256)"
        )


def named_tokenizer(path: str, lab: Path) -> tuple[PreTrainedTokenizerBase, Path]:
    """The tokenizer folder `model.tokenizer` names (relative to the lab unless absolute)."""
    folder = spec_path(lab, path)
    if not (folder / "tokenizer.json").exists() and not (folder / "tokenizer_config.json").exists():
        raise TunelabError(
            f"model.tokenizer {path!r}: no tokenizer files in {folder}; point it at a folder "
            "written by save_pretrained, or leave it out to train a BPE on the train split"
        )
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if tokenizer.eos_token_id is None:
        raise TunelabError(
            f"model.tokenizer {path!r} has no EOS token: packed documents need one between them"
        )
    return tokenizer, folder


def tokenizer_files(folder: Path) -> list[Path]:
    """The files of a tokenizer folder that its identity covers (all but `settings.json`, the
    record of how a BPE was trained)."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name != "settings.json")


def files_sha256(files: dict[str, str]) -> str:
    """The sha256 of a tokenizer's files together, from each file's sha256 by its name."""
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def scratch_tokenizer_folder(
    model_spec, lab: Path, data_version: str | None = None
) -> tuple[PreTrainedTokenizerBase, Path, dict]:
    """A scratch model's tokenizer, the folder it is read from, and where it comes from (with
    its settings when trained here, on `data_version`'s train split)."""
    if model_spec.tokenizer is not None:
        tokenizer, folder = named_tokenizer(model_spec.tokenizer, lab)
        return tokenizer, folder, {"source": "path", "path": str(folder)}
    tokenizer, folder, settings = trained_tokenizer(model_spec.bpe, lab, data_version)
    return tokenizer, folder, {"source": "bpe", "settings": settings}


def scratch_tokenizer(
    model_spec, lab: Path, data_version: str | None = None
) -> tuple[PreTrainedTokenizerBase, dict]:
    """A scratch model's tokenizer and its identity: where it comes from, its settings (when
    trained here, on `data_version`'s train split) and the sha256 of its files."""
    tokenizer, folder, found = scratch_tokenizer_folder(model_spec, lab, data_version)
    found |= {
        "vocab_size": len(tokenizer),
        "files": {p.name: sha256_file(p) for p in tokenizer_files(folder)},
    }
    found["sha256"] = files_sha256(found["files"])
    return tokenizer, found
