"""`tunelab data`: load -> clean -> split -> dedup -> version, and the report of it.

Every row read is accounted for: it is kept, quarantined (with file, line and reason) or
removed as a duplicate, and the pipeline refuses to finish if those do not add up. Data no lab
can use (an empty split, one label left, a source whose every row was quarantined) is refused
before a version is written (`usable.py`).

An image lab (task image_classification) goes the same way: its records are read into image
examples (`image_rows`: each image decoded, checked, staged), there is no cleaning, and the
version keeps its images beside its rows (`version.write_version`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tunelab.core.layout import DATA
from tunelab.core.spec import Spec
from tunelab.core.store import SPLITS, Store
from tunelab.data.balance import imbalance_warnings
from tunelab.data.batches import reporting
from tunelab.data.cleaning import apply_cleaning, make_rule, rule_settings
from tunelab.data.conflicts import find_conflicts
from tunelab.data.conversations import conversation_check
from tunelab.data.conversations import summary as conversation_summary
from tunelab.data.dedup import Dedup, deduplicate, held_out_copies
from tunelab.data.example import compute_digests
from tunelab.data.guard_sets import load_guard_sets, overlap_warnings
from tunelab.data.image_rows import ImageIntake, check_image_spec, image_summary, staged_images
from tunelab.data.label_sets import (
    label_set_check,
    seen_labels,
    set_counts,
    set_summary,
    set_warnings,
    stratum,
    unify_set_spellings,
)
from tunelab.data.label_spelling import (
    case_warnings,
    missing_mark_warnings,
    number_warnings,
    unify_label_spellings,
)
from tunelab.data.loaders import Example, Rejection, load_sources
from tunelab.data.opened import opened_test_warnings
from tunelab.data.pinned import check_pinned, pin_eval, pinned_rows
from tunelab.data.raw import DataError
from tunelab.data.source_summary import across_sources, source_counts, sources_missing
from tunelab.data.spill import TEXTS_IN_MEMORY_MB, TextSpill, text_spill
from tunelab.data.split import (
    Splits,
    carve_validation,
    presplit_examples,
    split_examples,
    straddling_groups,
)
from tunelab.data.usable import check_usable, more_rows, tally_sources
from tunelab.data.version import (
    damaged_files,
    publish,
    same_rows,
    settings_of,
    version_and_rows_ids,
    version_exists,
    write_version,
)

MAX_PAIRS = 25
"""Pairs of each method listed in the report; `duplicates.counts` counts all of them and
duplicates.jsonl holds all of them."""


Say = Callable[[str], None]
"""Where the step says what it is doing (a status line on a terminal)."""


def _quiet(_: str) -> None:
    pass


def build_data(
    spec: Spec,
    lab: Path,
    store: Store,
    current: bool = True,
    say: Say | None = None,
    texts: dict | None = None,
) -> dict[str, Any]:
    """Build (or find) the data version the spec describes, make it current (unless not
    `current`: an ablation's version, handed to its runs instead), return its report. The test
    split is written and hashed; the report holds only its counts. `say` hears each stage as
    it begins (a million rows take minutes). `texts`, when given, is filled with where the
    rows' texts were held (`spill.TextSpill.summary`)."""
    check_image_spec(spec)  # image sources for an image lab, text ones otherwise
    if spec.data.engine == "datatrove" and not spec.images:  # before minutes of reading
        from tunelab.data.near_datatrove import require_datatrove

        require_datatrove()
    tell, stage = say or _quiet, [""]

    def staged(text: str) -> None:  # a stage begins; a long map within it says how far it is
        stage[0] = text
        tell(text)

    budget = spec.data.texts_in_memory_mb or TEXTS_IN_MEMORY_MB
    with (
        text_spill(store.data_dir("staging").parent, budget) as spill,
        reporting(lambda done: tell(f"{stage[0]}: {done}")),
    ):
        if not spec.images:
            report = _build(spec, Path(lab), store, current, staged, spill)
        else:
            with staged_images(store) as staging:
                report = _build(spec, Path(lab), store, current, staged, spill, staging)
    if texts is not None:  # this build's, not the stored report's: the budget is a setting
        texts.update(spill.summary())
    return report


def _build(
    spec: Spec,
    lab: Path,
    store: Store,
    current: bool,
    say: Say,
    spill: TextSpill,
    staging: Path | None = None,
) -> dict[str, Any]:
    """`build_data`; `spill`: where texts past the memory budget wait; `staging`: where an
    image lab's accepted images wait for the version."""
    data = spec.data
    say(f"data: reading {len(data.sources)} source(s)")
    for i, rule in enumerate(data.cleaning):
        make_rule(rule, i)  # a bad rule fails before any file is read
    generative = spec.task.generative  # rows carry a target; a label is an optional category
    task_labels = None if generative else spec.task.labels
    text_only = generative and not spec.task.needs_target  # pretrain: the text is all
    # each row's own check, of one kind at most (`core.spec`): images need task
    # image_classification, conversations task extraction or format, multilabel an encoder
    multilabel = spec.task.type == "multilabel"  # label sets: `label_sets.py`
    conversations = None
    if staging:
        check = ImageIntake.of(spec, lab, staging).check
    elif data.fields.conversations:  # `messages` or prompt/completion rows
        check = conversations = conversation_check(data.fields, task_labels, spec.task.type)
    elif multilabel:
        check = label_set_check(data.fields, spec.task)
    else:
        check = None
    guard = load_guard_sets(spec, lab)  # a forgetting guardrail's text, checked first
    loaded = load_sources(data, task_labels, lab, generative, text_only, check, spill.hold)
    spill.hold_all(loaded.examples)  # past the budget, the first texts read go to disk too
    if data.cleaning:  # none is the only choice for conversations: nothing to say
        say(f"data: cleaning {len(loaded.examples):,} rows")
    cleaned = apply_cleaning(loaded.examples, data.cleaning, spill.hold)
    loaded.examples = []  # the texts before cleaning: each text is held once, not twice
    unify = unify_set_spellings if multilabel else unify_label_spellings
    cleaned.examples = unify(cleaned.examples, [r.rule for r in data.cleaning])
    examples, too_long, long_warnings = _long_texts(
        cleaned.examples, data.max_chars, data.long_text
    )
    say(f"data: grouping {len(examples):,} rows by content, splitting")
    compute_digests(examples)  # what makes two rows the same example, on every core
    conflicts = find_conflicts(examples, generative, data.dedup.conflicts)
    grouped = data.fields.group is not None
    strata = stratum(conflicts.kept) if multilabel else None
    carve = data.split.validation_from_train
    if loaded.presplit:
        splits = presplit_examples(conflicts.kept)
        if carve is not None:
            splits = carve_validation(splits, data.split, grouped, strata)
    elif carve is not None:
        raise DataError(
            "data.split.validation_from_train holds out validation rows from a train split "
            "that comes with the data; this data is split by data.split's shares, so set "
            "data.split.validation instead"
        )
    else:
        splits = split_examples(conflicts.kept, data.split, grouped, strata)
    held_out = 0
    if data.eval_from:  # validation and test as an earlier version has them; train changes
        splits, held_out = pin_eval(splits, pinned_rows(store, data.eval_from))
    say("data: finding duplicates")
    dedup = deduplicate(splits, data.dedup, spec.images, data.engine, store.path(DATA))
    quarantine = loaded.rejections + cleaned.rejections + too_long + conflicts.rejections

    seen = (
        seen_labels(dedup.splits)
        if multilabel
        else {ex.label for rows in dedup.splits.values() for ex in rows}
    )
    labels = list(task_labels) if task_labels else sorted(seen)
    settings = settings_of(data, labels, loaded.sources, spec.images, guard)
    version, rows = version_and_rows_ids(dedup.splits, quarantine, settings)
    new = not version_exists(store, version)
    damaged = [] if new else damaged_files(store, version)  # written again, whole

    counts = _tally(loaded.rows_read, dedup, quarantine, held_out if data.eval_from else None)
    manifest = {
        "labels": labels,
        "counts": (set_counts if multilabel else _split_counts)(dedup.splits, labels),
        "rows": counts,
        "presplit": loaded.presplit,
        "rows_id": rows,
        "sources": tally_sources(loaded.sources, quarantine),
        "rules": rule_settings(data.cleaning),
        "eval_from": data.eval_from,
        "settings": {k: v for k, v in settings.items() if k not in ("labels", "cleaning")},
    }
    if guard:
        manifest["guard_sets"] = {g.on: g.summary() for g in guard}
    images = image_summary(dedup.splits, data, staging) if staging else None
    if images:
        manifest["images"] = images
    warnings = check_usable(manifest, spec) + long_warnings  # refuses unusable data
    warnings += _warnings(spec, dedup.splits, len(conflicts.groups), loaded.presplit, seen)
    if guard:
        warnings += overlap_warnings(guard, (ex.text for ex in dedup.splits["train"]))
    warnings += opened_test_warnings(store, dedup.splits, version)
    warnings += [w for w in [held_out_copies(dedup.pairs)] if w]
    report = {
        "version": version,
        "new": new,
        "rewritten": damaged or None,
        **counts,
        "splits": manifest["counts"],
        "labels": labels,
        **({"label_sets": set_summary(dedup.splits)} if multilabel else {}),
        # pretrain reads no labels: its split table counts documents by source instead
        "by_source": source_counts(dedup.splits) if text_only else None,
        "cleaning": cleaned.changed,
        "quarantine": {
            "file": _shown(store.data_dir(version) / "quarantine.jsonl", store.lab),
            "reasons": dict(sorted(Counter(r.kind for r in quarantine).items())),
        },
        "duplicates": {
            "policy": data.dedup.policy,
            "engine": data.engine,
            "counts": dedup.counts(),
            "pairs": _first_of_each_method(dedup.pairs, MAX_PAIRS),
            "pairs_total": len(dedup.pairs),
            "pairs_file": _shown(store.data_dir(version) / "duplicates.jsonl", store.lab),
            "removed": len(dedup.removed),
            "across_sources": across_sources(dedup.pairs),
        },
        "conflicts": conflicts.report(data.dedup.conflicts),
        "rows_id": rows,
        "same_rows_as": same_rows(store, rows, version),
        "presplit": loaded.presplit,
        "validation_from_train": (
            {"share": carve, "rows": len(splits["validation"]), "seed": data.split.seed}
            if carve is not None
            else None
        ),
        "eval_from": data.eval_from,
        # this build's examples kept out of train as the pinned validation and test ones
        "held_out_of_train": held_out if data.eval_from else None,
        "guard_sets": manifest.get("guard_sets"),
        "conversations": (
            conversation_summary([ex for rows in dedup.splits.values() for ex in rows])
            | {"sharegpt_rows": conversations.sharegpt, "content_parts_rows": conversations.parts}
            if conversations
            else None
        ),
        "warnings": warnings,
    }
    if images:
        report["images"] = {**images, "folder": _shown(store.data_dir(version) / "images", lab)}
    if new or damaged:
        say(f"data: writing version {version}" + (" again (damaged)" if damaged else ""))
        write_version(
            store,
            version,
            dedup.splits,
            quarantine,
            report,
            manifest,
            dedup.pairs,
            staging,
            guard,
            replace=bool(damaged),
        )
    if data.eval_from:
        check_pinned(store, version, data.eval_from)
    publish(store, version, new, counts, current)
    return report


def _warnings(
    spec: Spec, splits: Splits, conflicts: int, presplit: bool, seen: set[str]
) -> list[str]:
    """What the report warns of besides usability and long texts: a group in two splits of
    the user's split, label conflicts kept, class imbalance, task labels never seen, a pretrain
    source missing from validation or test."""
    data, warnings = spec.data, []
    if data.fields.group is not None and presplit:
        warnings += straddling_groups(splits)
    if conflicts and data.dedup.conflicts == "report":
        warnings.append(
            f"{conflicts} {'image' if spec.images else 'text'}(s) have different labels in "
            "different copies, all kept (dedup.conflicts: report); see duplicates.conflicts in "
            "the report"
        )
    if spec.task.type == "pretrain":
        warnings += sources_missing(
            splits, lambda split: more_rows(split, {"presplit": presplit}, spec)
        )
    warnings += case_warnings(seen)
    if not spec.task.generative:  # a class named as another is, or as an empty cell
        warnings += number_warnings(seen) + missing_mark_warnings(seen)
    if spec.task.type == "multilabel":  # per label, not per label set
        warnings += set_warnings(splits.get("train", []))
    elif not spec.task.generative:
        warnings += imbalance_warnings(splits.get("train", []))
    return warnings  # task.labels with no row: `usable.check_usable` says what that does


def _long_texts(
    examples: list[Example], max_chars: int, policy: str
) -> tuple[list[Example], list[Rejection], list[str]]:
    """Texts over `max_chars`: kept with a warning naming each line, or quarantined."""
    long = [ex for ex in examples if len(ex.text) > max_chars]
    if not long:
        return examples, [], []
    if policy == "quarantine":
        reason = f"text longer than data.max_chars ({max_chars:,} characters)"
        gone = {ex.id for ex in long}
        kept = [ex for ex in examples if ex.id not in gone]
        return (
            kept,
            [ex.reject("too_long", f"{len(ex.text):,} characters: {reason}") for ex in long],
            [],
        )
    where = ", ".join(f"{ex.origin} ({len(ex.text):,})" for ex in long[:5])
    more = f" and {len(long) - 5} more" if len(long) > 5 else ""
    return (
        examples,
        [],
        [
            f"{len(long)} text(s) over data.max_chars ({max_chars:,} characters): {where}{more}; "
            "set data.long_text: quarantine to set them aside"
        ],
    )


def _first_of_each_method(pairs: list[dict], n: int) -> list[dict]:
    """Up to n pairs of each method (exact, near) for the report; all are in duplicates.jsonl."""
    shown: dict[str, int] = {}
    out = []
    for pair in pairs:
        if shown.get(pair["method"], 0) < n:
            shown[pair["method"]] = shown.get(pair["method"], 0) + 1
            out.append(pair)
    return out


def _tally(
    rows_read: int, dedup: Dedup, quarantine: list[Rejection], held_out: int | None = None
) -> dict[str, int]:
    """What became of every row read. With `data.eval_from`, this build's own rows kept are its
    train and the `held_out` rows that are pinned ones (validation and test are the pinned
    version's rows, which a new cleaning rule may have quarantined in this build)."""
    kept = sum(len(rows) for rows in dedup.splits.values())
    if held_out is not None:
        kept = len(dedup.splits["train"]) + held_out
    counts = {
        "rows_read": rows_read,
        "kept": kept,
        "quarantined": len(quarantine),
        "duplicates_removed": len(dedup.removed),
    }
    accounted = counts["kept"] + counts["quarantined"] + counts["duplicates_removed"]
    if accounted != rows_read:
        raise AssertionError(
            f"rows went missing: read {rows_read}, but kept + quarantined + removed = {accounted}"
        )
    return counts


def _split_counts(splits: Splits, labels: list[str]) -> dict[str, dict[str, Any]]:
    out = {}
    for split in SPLITS:
        per_label = Counter(ex.label for ex in splits.get(split, []))
        out[split] = {
            "n": sum(per_label.values()),
            "labels": {label: per_label.get(label, 0) for label in labels},
        }
    return out


def _shown(path: Path, lab: Path) -> str:
    try:
        return path.relative_to(lab).as_posix()
    except ValueError:
        return str(path)
