"""Whether two data versions evaluate on the same examples, whatever else changed.

A data version's id covers everything (every split, the rules, the settings), so a new
cleaning rule or a new source makes a new version even when its validation split is
byte-identical to the old one. Runs are paired example by example on validation, so what
decides whether two runs can be compared is the content of that split alone: its sha256 (of
the stored `validation.jsonl`: ids, texts, labels and targets), recorded in each version's
manifest (`split_sha256`; `files` for versions written before it).

Where validation really differs, `split_changes` counts what was added, removed and changed
(by example id), and `differing_text` says how to keep it fixed while train changes
(`data.eval_from`).
"""

from __future__ import annotations

from tunelab.core.store import Store, StoreError

EVAL_SPLIT = "validation"


def split_digest(store: Store, version: str, split: str = EVAL_SPLIT) -> str | None:
    """The sha256 of a version's split as stored (None when the manifest does not say)."""
    try:
        manifest = store.data_manifest(version)
    except StoreError:
        return None
    recorded = (manifest.get("split_sha256") or {}).get(split)
    return recorded or (manifest.get("files") or {}).get(f"{split}.jsonl")


class SameEval:
    """Which data versions share `version`'s evaluation split (digests read once each)."""

    def __init__(self, store: Store, version: str, split: str = EVAL_SPLIT):
        self.store, self.version, self.split = store, version, split
        self._digests: dict[str, str | None] = {}
        self.digest = self.of(version)

    def of(self, version: str) -> str | None:
        if version not in self._digests:
            self._digests[version] = split_digest(self.store, version, self.split)
        return self._digests[version]

    def __call__(self, version: str) -> bool:
        """True when `version` evaluates on exactly the examples `self.version` does."""
        return version == self.version or (
            self.digest is not None and self.of(version) == self.digest
        )


def split_changes(store: Store, before: str, after: str, split: str = EVAL_SPLIT) -> dict:
    """Examples added, removed and changed (same id, other content) from `before` to `after`."""
    old = {r["id"]: r for r in store.read_split(before, split)}
    new = {r["id"]: r for r in store.read_split(after, split)}
    return {
        "added": len(new.keys() - old.keys()),
        "removed": len(old.keys() - new.keys()),
        "changed": sum(1 for i in new.keys() & old.keys() if new[i] != old[i]),
    }


def differing_text(before: str, after: str, changes: dict, split: str = EVAL_SPLIT) -> str:
    """What differs between two versions' evaluation splits, and how to keep it fixed."""
    return (
        f"the {split} split differs between data versions {before} and {after} "
        f"({changes['added']} added, {changes['removed']} removed, {changes['changed']} "
        "changed), so their runs are not paired; to change train alone, keep validation and "
        f"test fixed with `data.eval_from: {before}`"
    )
