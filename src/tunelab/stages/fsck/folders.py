"""`fsck`'s checks of what commands leave in folders: the runs' files, the comparisons'
inputs, the bundles and the leftovers of killed commands."""

from __future__ import annotations

from pathlib import Path

from tunelab.core.chain import line_hash
from tunelab.core.digest import sha256_file
from tunelab.core.exports import recorded_export, relisted
from tunelab.core.layout import (
    BUNDLES,
    COMPARISONS,
    FINAL_PREDICTIONS,
    FINALS,
    GROUPS,
    NOISE,
    PLANS,
    PREDICTIONS,
    RECORD,
    SIZING_SCRATCH,
    number_of,
)
from tunelab.core.run_files import changed_weights, vouched, what_changed
from tunelab.core.store import Store
from tunelab.core.sums import SUMS, BundleError, compare, listed
from tunelab.modeling.checkpoint_files import (
    ADDED,
    CHECKPOINT_DIR,
    checkpoint_problems,
    find_checkpoint,
)
from tunelab.stages.fsck.problems import hashed, json_of, problem_at, rel


def comparison_inputs(store: Store, not_checked: list[str]) -> tuple[list[dict], int]:
    """Each run's predictions as every comparison that judged them hashed them: each file read
    once (a lab's comparisons name most runs again and again), a missing one named once, with
    the comparisons that stand on it."""
    out, n = [], 0
    fix = "restore the run's predictions, or invalidate the run"
    judged: dict[Path, dict[str, list[str]]] = {}  # a file -> its digest -> the comparisons
    for record in (json_of(path) for path in store.numbered(COMPARISONS)):
        for item in record.get("inputs", []):
            n += 1
            path = store.runs_dir / item["run"] / PREDICTIONS
            judged.setdefault(path, {}).setdefault(item["predictions_sha256"], []).append(
                record["id"]
            )
    for path, digests in judged.items():
        if _invalidated(path.parent):  # as fsck advised: no verdict stands on it any more
            continue
        if not path.is_file():
            ids = sorted(
                {c for cs in digests.values() for c in cs}, key=lambda c: number_of(Path(c))
            )
            gone = not (path.parent / RECORD).is_file()  # the whole run: nothing to invalidate
            again = "restore the run's folder from a backup" if gone else fix
            problem = (
                f"missing (judged by comparison{'s' if len(ids) > 1 else ''} {', '.join(ids)})"
            )
            out.append(problem_at(store, "comparison", path, problem, again))
            continue
        digest = sha256_file(path)
        for expected, ids in digests.items():
            if digest != expected:
                changed = f"changed since comparison {', '.join(ids)} judged it"
                out.append(problem_at(store, "comparison", path, changed, fix))
    return out, n


STOPPED = "killed or stopped by a full disk"
"""What leaves a leftover: a kill, or a write a full disk refused (named so: it read "killed"
after the disk-full message had sent the user to fsck)."""


def _number(comparison_id: str) -> int:
    return number_of(Path(comparison_id))  # `c2` before `c10`


def final_predictions(store: Store, not_checked: list[str]) -> tuple[list[dict], int]:
    """Each final's per-example predictions on the test split, as its record hashed them (a
    final recorded before they were kept has none to check)."""
    out, n = [], 0
    for path in store.numbered(FINALS):
        record = json_of(path)
        kept = record.get("predictions")
        if record and not isinstance(kept, dict):  # said, as a run's unhashed files are
            not_checked.append(
                f"{path.relative_to(store.lab)}: its test predictions (the final was written "
                "by a tunelab that did not keep them)"
            )
            continue
        if not record:  # unreadable: named once, elsewhere
            continue
        n += 1
        changed = f"changed since final {record.get('n')} wrote it"
        fix = "restore it from a backup (the test score stands on it)"
        out += hashed(store, "final", store.lab / kept["file"], kept["sha256"], changed, fix)
    named = {
        kept["file"]
        for path in store.numbered(FINALS)
        if isinstance(kept := (json_of(path) or {}).get("predictions"), dict)
    }
    for path in sorted(store.path(FINALS).glob(f"*{FINAL_PREDICTIONS}")):
        if rel(store, path) not in named:  # a final killed after scoring, before its record
            problem = (
                "test predictions no final record names: a final killed after it scored the "
                "test split, before its result was recorded (its opening is logged: the look "
                "is spent, and the next final needs --reason)"
            )
            out.append(problem_at(store, "leftover", path, problem, "delete it"))
    return out, n


def run_folders(store: Store, not_checked: list[str]) -> tuple[list[dict], int]:
    out, n = [], 0
    if not store.runs_dir.exists():
        return out, n
    for folder in sorted(p for p in store.runs_dir.iterdir() if p.is_dir()):
        if folder.name.startswith("."):
            continue
        n += 1
        if not (folder / RECORD).exists():
            out.append(
                problem_at(
                    store,
                    "runs",
                    folder,
                    "a run folder without record.json: its command died before writing it, "
                    "or the record was deleted (then named above with the log's line)",
                    "restore the record if the log wrote one, else move the folder out of the "
                    "store once nothing needs it",
                )
            )
            continue
        record = json_of(folder / RECORD)
        if record.get("status") == "invalid":  # `tunelab invalidate`: no command uses its
            continue  # files, and one lost (fsck's advice was to invalidate) stays lost
        if record.get("status") == "completed":
            out += _run_files(store, folder, record, not_checked)
        else:  # weights saved before a stop, or a checkpoint: `resume` reads them
            out += _saved_weights(store, folder, record) + _checkpoint(store, folder, record)
    return out, n


def _invalidated(folder: Path) -> bool:
    """Whether the run in `folder` was marked invalid (`tunelab invalidate`)."""
    return (folder / RECORD).is_file() and json_of(folder / RECORD).get("status") == "invalid"


def _checkpoint(store: Store, folder: Path, record: dict) -> list[dict]:
    """A run not completed: its checkpoint's files as their `state.json` hashed them, and the
    checkpoint its record says it kept there (a lab cloned without it said nothing)."""
    found = find_checkpoint(folder / CHECKPOINT_DIR)
    if found is None:
        kept = record.get("checkpoint")
        if not kept or record.get("status") == "running":
            return []
        problem = (
            f"missing: the run's record says it kept its checkpoint at {kept}/ when it stopped"
        )
        fix = "restore it (deleted, or not copied or committed with the lab) to `tunelab resume`"
        return [problem_at(store, "runs", folder / kept, problem, fix)]
    fix = "restore it from a backup, or start the run again (`tunelab resume` refuses it)"
    added = "delete that file (nothing of the run's is in it), or start the run again"
    return [
        problem_at(
            store,
            "runs",
            found,
            f"the checkpoint is not as written: {problem}",
            added if problem.endswith(ADDED) else fix,
        )
        for problem in checkpoint_problems(found)
    ]


def _saved_weights(store: Store, folder: Path, record: dict) -> list[dict]:
    """A run not completed whose record hashed its saved weights: as it hashed them."""
    fix = "restore it, or start the run again (`tunelab resume` refuses it as it is)"
    return [
        problem_at(store, "runs", p, problem, fix) for p, problem in changed_weights(folder, record)
    ]


def _run_files(store: Store, folder: Path, record: dict, not_checked: list[str]) -> list[dict]:
    """A completed run's predictions and weights: there, and as their record hashed them."""
    fix = "restore it, or `tunelab invalidate` the run"
    out, unhashed = [], []
    for path, digest in vouched(folder, record).items():
        problem = what_changed(path, digest)
        if problem:
            out.append(problem_at(store, "runs", path, problem, fix))
        elif not digest:
            unhashed.append(path.name)
    if unhashed:
        not_checked.append(
            f"{rel(store, folder)}: the bytes of {', '.join(unhashed)} (its record holds no "
            "sha256 of them: written before store format 2)"
        )
    return out


def bundles(store: Store, not_checked: list[str]) -> tuple[list[dict], int]:
    out, n, again = [], 0, "export the run again"
    for path in sorted((store.lab / BUNDLES).glob(f"*/{SUMS}")):
        n, bundle = n + 1, path.parent
        try:
            found = compare(bundle, listed(bundle))
        except BundleError as err:
            out.append(problem_at(store, "bundle", path, str(err), again))
            continue
        for what, names in (
            ("changed since the export", found["changed"]),
            ("missing", found["missing"]),
        ):
            out += [problem_at(store, "bundle", bundle / name, what, again) for name in names]
        out += [
            problem_at(store, "bundle", bundle / name, "not listed in SHA256SUMS", again)
            for name in found["unlisted"]
        ]
        out += _anchored(store, bundle / "tunelab.json")
        if record := recorded_export(store, bundle):
            if why := relisted(record, bundle):
                out.append(problem_at(store, "bundle", path, why, again))
        else:
            problem = (
                "a bundle that no export record names: its export stopped (a kill) after the "
                "bundle was whole, before it was recorded"
            )
            fix = "remove the folder and export the run again (or `tunelab verify` it as it is)"
            out.append(problem_at(store, "bundle", bundle, problem, fix))
    return out, n


def _anchored(store: Store, info_path: Path) -> list[dict]:
    """A bundle holds the log's head as it exported: that line must still be in the log."""
    anchor = json_of(info_path).get("lab_log") if info_path.is_file() else None
    if not anchor or not anchor.get("head"):
        return []
    log = store.log_path
    raw = [line for line in log.read_bytes().split(b"\n") if line.strip()] if log.exists() else []
    at = anchor["lines"]
    if at <= len(raw) and line_hash(raw[at - 1]) == anchor["head"]:
        return []
    problem = (
        f"holds the log's head at line {at} ({anchor['head'][:12]}), which the lab's log no "
        "longer has: its past was rewritten after the export"
    )
    return [problem_at(store, "bundle", info_path, problem, "restore the log from a backup")]


def leftovers(store: Store, not_checked: list[str]) -> tuple[list[dict], int]:
    out = []
    killed = "delete it once no tunelab command is running (nothing reads it; --repair leaves it)"
    for root in (store.root, store.lab / BUNDLES):
        listed: list[Path] = []
        for path in sorted(root.rglob(".*.tmp")) if root.exists() else []:
            if any(folder in path.parents for folder in listed):
                continue  # inside a temporary folder already named: one leftover, not two
            listed.append(path)
            problem = f"a temporary left by a command {STOPPED} (or one writing it now)"
            out.append(problem_at(store, "leftover", path, problem, killed))
    runs = sorted(store.runs_dir.glob("*/checkpoint.new")) if store.runs_dir.exists() else []
    for path in runs:
        problem = (
            f"a checkpoint being written when its run was {STOPPED} (the run's last whole one, "
            "if any, is beside it)"
        )
        out.append(problem_at(store, "leftover", path, problem, killed))
    scratch = store.path(SIZING_SCRATCH)
    for path in sorted(scratch.iterdir()) if scratch.is_dir() else []:
        problem = (
            "what `tunelab size` writes while it measures (a scratch model, its probes' "
            "results): left by a size that was killed (or measuring now)"
        )
        out.append(problem_at(store, "leftover", path, problem, "delete it once no size runs"))
    for folder in (COMPARISONS, PLANS, GROUPS, NOISE):
        for path in sorted(store.path(folder).glob("*.json")):
            if not path.stat().st_size:  # reserved, never written
                problem = (
                    f"an empty record: a number reserved by a command {STOPPED} before it wrote "
                    "it (or writing it now)"
                )
                out.append(problem_at(store, "leftover", path, problem, killed))
    return out, len(out)
