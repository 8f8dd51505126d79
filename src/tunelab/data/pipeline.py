"""`tunelab data`: load -> clean -> split -> dedup -> version; the tally, manifest, warnings
and report of a build are made from its `built.Built`.

Every row read is accounted for: it is kept, quarantined (with file, line and reason) or
removed as a duplicate, and the pipeline refuses to finish if those do not add up. Data no lab
can use (an empty split, one label left, a source whose every row was quarantined) is refused
before a version is written (`usable.py`).

An image lab (task image_classification) goes the same way: its records are read into image
examples (`image_rows`: each image decoded, checked, staged), there is no cleaning, and the
version keeps its images beside its rows (`version.write_version`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tunelab.core.layout import DATA
from tunelab.core.spec import Spec
from tunelab.core.store import Store
from tunelab.data.batches import reporting
from tunelab.data.built import Built
from tunelab.data.cleaning import apply_cleaning, make_rule
from tunelab.data.conflicts import find_conflicts
from tunelab.data.conversations import conversation_check
from tunelab.data.dedup import deduplicate
from tunelab.data.example import compute_digests
from tunelab.data.guard_sets import load_guard_sets
from tunelab.data.image_rows import ImageIntake, check_image_spec, image_summary, staged_images
from tunelab.data.label_sets import (
    label_set_check,
    seen_labels,
    stratum,
    unify_set_spellings,
)
from tunelab.data.label_spelling import (
    unify_label_spellings,
)
from tunelab.data.loaders import Example, Rejection, load_sources
from tunelab.data.pinned import check_pinned, pin_eval, pinned_rows
from tunelab.data.raw import DataError
from tunelab.data.spill import TEXTS_IN_MEMORY_MB, TextSpill, text_spill
from tunelab.data.split import (
    Splits,
    carve_validation,
    presplit_examples,
    split_examples,
)
from tunelab.data.version import (
    damaged_files,
    publish,
    settings_of,
    version_and_rows_ids,
    version_exists,
    write_version,
)

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
    multilabel = spec.task.type == "multilabel"  # label sets: `label_sets.py`
    check, conversations = _row_check(spec, lab, staging, task_labels)
    guard = load_guard_sets(spec, lab)  # a forgetting guardrail's text, checked first
    objects = spec.task.type == "extraction"  # a target written as a string holds an object
    loaded = load_sources(data, task_labels, lab, generative, text_only, check, spill.hold, objects)
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
    splits, held_out = _split(spec, store, conflicts.kept, loaded.presplit)
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
    built = Built(
        spec=spec,
        lab=lab,
        store=store,
        loaded=loaded,
        cleaned=cleaned,
        conflicts=conflicts,
        dedup=dedup,
        quarantine=quarantine,
        labels=labels,
        seen=seen,
        settings=settings,
        version=version,
        rows_id=rows,
        held_out=held_out,
        guard=guard,
        images=image_summary(dedup.splits, data, staging) if staging else None,
        conversations=conversations,
    )
    new = not version_exists(store, version)
    damaged = [] if new else damaged_files(store, version)  # written again, whole
    counts = built.tally()
    manifest = built.manifest(counts)
    warnings = built.warnings(manifest, long_warnings)  # refuses unusable data first
    report = built.report(counts, manifest, warnings, new, damaged)
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


def _row_check(spec: Spec, lab: Path, staging: Path | None, task_labels):
    """Each row's own check, of one kind at most (`core.spec`: images need task
    image_classification, conversations task extraction or format, multilabel an encoder),
    and the conversation check where it is one (the report counts its row shapes)."""
    fields = spec.data.fields
    if staging:
        return ImageIntake.of(spec, lab, staging).check, None
    if fields.conversations:  # `messages` or prompt/completion rows
        check = conversation_check(fields, task_labels, spec.task.type)
        return check, check
    if spec.task.type == "multilabel":
        return label_set_check(fields, spec.task), None
    return None, None


def _split(spec: Spec, store: Store, kept: list[Example], presplit: bool) -> tuple[Splits, int]:
    """The rows kept, split: the user's split where the data comes split (validation carved
    from its train where asked), else by data.split's shares; with data.eval_from, validation
    and test as the earlier version has them. Also how many of this build's rows that pinning
    kept out of train."""
    data = spec.data
    grouped = data.fields.group is not None
    strata = stratum(kept) if spec.task.type == "multilabel" else None
    carve = data.split.validation_from_train
    if presplit:
        splits = presplit_examples(kept)
        if carve is not None:
            splits = carve_validation(splits, data.split, grouped, strata)
    elif carve is not None:
        raise DataError(
            "data.split.validation_from_train holds out validation rows from a train split "
            "that comes with the data; this data is split by data.split's shares, so set "
            "data.split.validation instead"
        )
    else:
        splits = split_examples(kept, data.split, grouped, strata)
    if not data.eval_from:  # validation and test as an earlier version has them; train changes
        return splits, 0
    return pin_eval(splits, pinned_rows(store, data.eval_from))


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
