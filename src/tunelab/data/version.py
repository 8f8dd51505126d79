"""The data version: a content hash, its folder in the store, and the seal on the test split.

The id is a hash of what training would see (the kept rows of each split) and of how they
were made (rules, split and dedup settings, field mapping, labels), so changing any of them
makes a new version and the old folder stays as it was. The quarantine's positions are
hashed too, so a stored version's quarantine file always matches its report. An image row is
hashed with its bytes' sha256, and an image lab's settings add how images are read and
compared (`data.images`, the difference hash's size and `dedup.image_hamming`); a text lab's
settings leave those fields out, so its ids are those it had before images existed.

An image version keeps its images beside its rows, content-addressed (`images/<sha256>.<ext>`,
the `image` of each row, relative to the version folder), each listed with its sha256 in the
manifest's `files` as the split files are (so `tunelab fsck` checks them).

A version folder is written into a temporary folder and renamed into place: a kill leaves
either no version or a complete one, never half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tunelab.core.digest import canonical_json, sha256_file, utf8_chunks
from tunelab.core.files import temporary_dir
from tunelab.core.layout import MANIFEST
from tunelab.core.spec import DataSpec
from tunelab.core.store import SPLITS, Store, atomic_write_json, now, write_jsonl
from tunelab.data.cleaning import rule_settings
from tunelab.data.guard_sets import GuardSet, write_sets
from tunelab.data.images import DHASH_SIZE, FORMATS
from tunelab.data.loaders import DataError, Rejection
from tunelab.data.opened import TEST_KEYS, write_test_keys
from tunelab.data.split import Splits

ID_CHARS = 12


IMAGE_ONLY = {"fields": {"image"}, "dedup": {"image_hamming"}}
"""Fields that only an image lab's settings hold (a text lab's ids stay as they were)."""
CONVERSATION_FIELDS = {"messages", "prompt", "completion"}
"""Fields that only conversations set: left out of the settings when unset, so the ids of
versions made before conversations existed stay as they were."""


def settings_of(
    data: DataSpec,
    labels: list[str],
    sources: list[dict],
    images: bool = False,
    guard: list[GuardSet] = (),
) -> dict[str, Any]:
    """How the rows were made: everything besides the rows that the version id covers. The
    sources' content hashes are part of it, so a changed file always makes a new version (and
    a report and manifest of its own), even when the rows it keeps are the same. `images`:
    the rows are images (task image_classification). `guard`: the forgetting sets of the
    spec's guardrails, whose files' hashes the id covers (a lab without one keeps its ids)."""
    left_out = {} if images else IMAGE_ONLY
    unset = {f for f in CONVERSATION_FIELDS if getattr(data.fields, f) is None}
    left_out = left_out | {"fields": set(left_out.get("fields", ())) | unset}
    return {
        "labels": labels,
        "sources": [s.model_dump(mode="json") for s in data.sources],
        "source_sha256": [s["sha256"] for s in sources],
        "fields": data.fields.model_dump(mode="json", exclude=left_out.get("fields")),
        "cleaning": rule_settings(data.cleaning),
        # validation_from_train only when set: the versions made before it keep their ids
        "split": data.split.model_dump(
            mode="json",
            exclude=None if data.split.validation_from_train else {"validation_from_train"},
        ),
        "dedup": data.dedup.model_dump(mode="json", exclude=left_out.get("dedup")),
        "max_chars": data.max_chars,
        "long_text": data.long_text,
        # only when set, so that the versions made before the option keep their ids
        **({"eval_from": data.eval_from} if data.eval_from else {}),
        **({"engine": data.engine} if data.engine != "local" else {}),
        **({"images": image_settings(data)} if images else {}),
        **({"guard_sets": [{"on": g.on, "sha256": g.sha256} for g in guard]} if guard else {}),
    }


def image_settings(data: DataSpec) -> dict[str, Any]:
    """How an image lab's images are read and compared, as its version records them."""
    return {
        "max_pixels": data.images.max_pixels,
        "formats": sorted(FORMATS),
        "dhash_size": DHASH_SIZE,
        "image_hamming": data.dedup.image_hamming,
    }


def rows_id(splits: Splits) -> str:
    """A hash of the kept rows alone, split by split: two versions with the same `rows_id`
    train and evaluate on identical examples."""
    return version_and_rows_ids(splits, [], {})[1]


def version_and_rows_ids(
    splits: Splits, quarantine: list[Rejection], settings: dict[str, Any]
) -> tuple[str, str]:
    """`version_id` and `rows_id` from one serialisation of the rows: the version's content
    is `{"examples": <the rows_id's content>, "quarantine": ..., "settings": ...}` in canonical
    JSON, whose keys sort in that order, so both hashes read the same pieces."""
    version, rows = hashlib.sha256(), hashlib.sha256()
    version.update(b'{"examples":')
    for chunk in utf8_chunks(_rows_json(splits)):
        version.update(chunk)
        rows.update(chunk)
    rest = {"quarantine": [[r.file, r.line, r.kind] for r in quarantine], "settings": settings}
    version.update(canonical_json(rest).replace("{", ",", 1).encode("utf-8"))
    return version.hexdigest()[:ID_CHARS], rows.hexdigest()[:ID_CHARS]


def _rows_json(splits: Splits) -> Iterator[str]:
    """The canonical JSON of `{split: [row.hashed(), ...]}`, a row at a time."""
    yield "{"
    for i, split in enumerate(sorted(SPLITS)):
        yield ("," if i else "") + canonical_json(split) + ":["
        for j, ex in enumerate(splits.get(split, [])):
            yield ("," if j else "") + canonical_json(ex.hashed())
        yield "]"
    yield "}"


def same_rows(store: Store, rows: str, version: str) -> list[str]:
    """Other versions whose kept rows are these (by their manifests' `rows_id`)."""
    out = []
    for manifest in store.data_manifests():
        other = json.loads(manifest.read_text(encoding="utf-8"))
        if other.get("rows_id") == rows and manifest.parent.name != version:
            out.append(manifest.parent.name)
    return out


def version_id(splits: Splits, quarantine: list[Rejection], settings: dict[str, Any]) -> str:
    """First 12 hex of the sha256 of a canonical JSON of rows, quarantine and settings."""
    return version_and_rows_ids(splits, quarantine, settings)[0]


def version_exists(store: Store, version: str) -> bool:
    return (store.data_dir(version) / MANIFEST).exists()


def damaged_files(store: Store, version: str) -> list[str]:
    """The files of stored version `version` that differ from its manifest's sha256 or are
    gone (its manifest itself, where that cannot be read): what a data step that finds the
    version again writes afresh (`write_version(..., replace=True)`). The sealed test split is
    not read, only found there: `final` checks its sha256 as it opens it, and `fsck` does."""
    folder = store.data_dir(version)
    try:
        files = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return [MANIFEST]
    if not isinstance(files, dict) or any(f"{s}.jsonl" not in files for s in SPLITS):
        return [MANIFEST]  # a split it cannot vouch for
    return [
        name
        for name, digest in files.items()
        if not (folder / name).is_file()
        or (name != "test.jsonl" and sha256_file(folder / name) != digest)
    ]


def write_version(
    store: Store,
    version: str,
    splits: Splits,
    quarantine: list[Rejection],
    report: dict[str, Any],
    manifest: dict[str, Any],
    duplicates: list[dict[str, Any]] = (),
    images: Path | None = None,
    guard: list[GuardSet] = (),
    replace: bool = False,
) -> dict[str, Any]:
    """Write the split files, quarantine, duplicate pairs, report and manifest; return the
    manifest. `replace`: the version's folder exists and is damaged (`damaged_files`); the
    one written takes its place (the same id: the same rows), the damaged one is removed.
    `images`: the folder where an image lab's accepted images were staged
    (`image_rows.staged_images`); the kept rows' images move from it into the version.

    `manifest` brings what the pipeline knows (labels, sources, settings); this adds the
    version, the time, and the sha256 of each file. `test_sha256` is the seal that `final`
    checks before it opens the test split.
    """
    final = store.data_dir(version)
    if final.exists() and not replace:
        raise DataError(f"{final} exists but has no manifest.json; move it aside and rerun")
    tmp = temporary_dir(final.parent, f".{version}.")
    try:
        files = {}
        for split in SPLITS:
            path = tmp / f"{split}.jsonl"
            write_jsonl(path, (ex.to_row() for ex in splits.get(split, [])))
            files[path.name] = sha256_file(path)
        if images is not None:
            files.update(_move_images(images, tmp, splits))
        files.update(write_sets(tmp, guard))
        files[TEST_KEYS] = sha256_file(write_test_keys(tmp, splits))  # `opened.py`
        write_jsonl(tmp / "quarantine.jsonl", (r.to_dict() for r in quarantine))
        files["quarantine.jsonl"] = sha256_file(tmp / "quarantine.jsonl")
        write_jsonl(tmp / "duplicates.jsonl", duplicates)
        files["duplicates.jsonl"] = sha256_file(tmp / "duplicates.jsonl")
        atomic_write_json(tmp / "report.json", report)
        files["report.json"] = sha256_file(tmp / "report.json")
        full = {
            "version": version,
            "created": now(),
            **manifest,
            "files": files,
            # each split's content: runs on two versions with the same validation pair up
            "split_sha256": {split: files[f"{split}.jsonl"] for split in SPLITS},
            "test_sha256": files["test.jsonl"],
        }
        atomic_write_json(tmp / MANIFEST, full)
        if replace:  # the damaged folder out of the way, then the whole one in its place
            os.rename(final, old := tmp.with_name(f".{version}.damaged.tmp"))
            os.rename(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return full


def _move_images(staging: Path, folder: Path, splits: Splits) -> dict[str, str]:
    """Each kept row's image, once, from the staging folder into `folder`'s images/: its path
    in the version -> its sha256 (`files` of the manifest)."""
    out: dict[str, str] = {}
    for split in SPLITS:
        for ex in splits.get(split, []):
            if ex.image is None or ex.image.stored in out:
                continue
            target = folder / ex.image.stored
            target.parent.mkdir(exist_ok=True)
            os.replace(staging / ex.image.stored, target)
            out[ex.image.stored] = ex.image.bytes_sha256
    return dict(sorted(out.items()))


def publish(
    store: Store, version: str, new: bool, counts: dict[str, Any], current: bool = True
) -> None:
    """Log `version` and then, if `current`, make it the current data, under the log's lock:
    CURRENT never names a version the log has not (a stop between the two leaves the version
    logged and the one before still current, which `fsck` names), and two data steps at once
    leave CURRENT at the one the log names last. Older versions stay where they are."""
    manifest = store.data_dir(version) / MANIFEST  # vouched for by the log, as a record is
    shown = str(manifest.relative_to(store.lab))
    store.log_event(
        "data",
        then=(lambda: store.set_current_data(version)) if current else None,
        version=version,
        new=new,
        current=current,
        **counts,
        record=shown,
        record_sha256=sha256_file(manifest),
    )
