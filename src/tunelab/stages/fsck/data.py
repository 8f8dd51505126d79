"""`fsck`'s data checks: every version's files against its manifest, the versions the store
names still there, each version logged, and CURRENT the one the log made current."""

from __future__ import annotations

from pathlib import Path

from tunelab.core.audit import vouching
from tunelab.core.layout import CURRENT, DATA, MANIFEST, RECORD, VERSION_ID
from tunelab.core.store import Store
from tunelab.stages.fsck.problems import hashed, json_of, problem_at, rel


def data_files(store: Store, not_checked: list[str]) -> tuple[list[dict], int]:
    out, n = _versions_named(store) + _versions_logged(store), 0
    fix = (
        "restore it from a backup, or run `tunelab data` again with the sources and spec that "
        "built it (it writes a damaged version again, whole)"
    )
    for manifest_path in store.data_manifests():
        manifest, folder = json_of(manifest_path), manifest_path.parent
        for name, digest in (manifest.get("files") or {}).items():
            n += 1
            what = "the sealed test split was changed" if name == "test.jsonl" else "changed"
            changed = f"{what} since the version was written (sha256 {digest[:12]} expected)"
            out += hashed(store, "data", folder / name, digest, changed, fix)
    return out, n


def _versions_named(store: Store) -> list[dict]:
    """Data versions the store names (CURRENT, each run's) that are gone from it."""
    named: dict[str, Path] = {}
    current = store.path(DATA) / CURRENT
    if current.is_file():
        named.setdefault(current.read_text().strip(), current)
    for folder in sorted(store.runs_dir.glob(f"*/{RECORD}")) if store.runs_dir.exists() else []:
        version = json_of(folder).get("data_version")
        if version:
            named.setdefault(version, folder)
    fix = (
        "restore the version's folder from a backup, or run `tunelab data` again with the "
        "sources and spec that built it"
    )
    edited = (
        "run `tunelab data` again (it writes the version it builds), or write the version of "
        "the log's last `data` event into it"
    )
    out = []
    for version, by in named.items():
        if not VERSION_ID.fullmatch(version):  # a path, not a version's folder name
            out.append(problem_at(store, "data", by, f"holds {version[:40]!r}, no version", edited))
        elif not (store.path(DATA) / version / MANIFEST).is_file():
            gone = f"names data version {version}, which is gone"
            out.append(problem_at(store, "data", by, gone, fix))
    return out


def _data_steps(store: Store) -> list[dict]:
    """The log's `data` events, in order."""
    return [e for _, e in store.numbered_events() if e.get("event") == "data"]


def unlogged_versions(store: Store, steps: list[dict] | None = None) -> list[Path]:
    """The manifests of the data versions no `data` event (`steps`, else read from the log)
    names, a data step stopped before it logged the version it wrote or a log that lost the
    line, and no `fsck --repair` accepted."""
    logged = {e.get("version") for e in (_data_steps(store) if steps is None else steps)}
    accepted = vouching(store)
    return [
        manifest
        for manifest in store.data_manifests()
        if manifest.parent.name not in logged and rel(store, manifest) not in accepted
    ]


def _versions_logged(store: Store) -> list[dict]:
    """Data versions the log does not name (`unlogged_versions`), and a CURRENT that is not the
    version the log's last data step made current (one stopped between the two)."""
    steps = _data_steps(store)
    out = [
        problem_at(
            store,
            "data",
            manifest.parent,
            "no `data` event in the log names this version: the data step that wrote it "
            "stopped before logging it, or the log lost its line",
            "run `tunelab data` again with the sources and spec that built it (it logs the "
            "version), remove the folder, or accept it with `tunelab fsck --repair --reason R`",
        )
        for manifest in unlogged_versions(store, steps)
    ]
    made_current = [e.get("version") for e in steps if e.get("current", True)]
    path = store.path(DATA) / CURRENT
    named = path.read_text().strip() if path.is_file() else None
    if made_current and named != made_current[-1] and named in {e.get("version") for e in steps}:
        out.append(
            problem_at(
                store,
                "data",
                path,
                f"names data version {named}, but the log's last data step made "
                f"{made_current[-1]} current (it stopped before it wrote CURRENT)",
                "run `tunelab data` again: it sets CURRENT to the version it logs",
            )
        )
    return out
