"""What `tunelab data` records of one build: the tally that adds up, the manifest the version
keeps, the warnings beside usability, and the report the command shows.

`pipeline.py` reads, cleans, splits and deduplicates; what it found on the way is a `Built`,
and everything here is made from one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunelab.core.spec import Spec
from tunelab.core.store import SPLITS, Store
from tunelab.data.balance import imbalance_warnings
from tunelab.data.cleaning import Cleaned, rule_settings
from tunelab.data.conflicts import Conflicts
from tunelab.data.conversations import summary as conversation_summary
from tunelab.data.dedup import Dedup, held_out_copies
from tunelab.data.guard_sets import overlap_warnings
from tunelab.data.label_sets import set_counts, set_summary, set_warnings
from tunelab.data.label_spelling import case_warnings, missing_mark_warnings, number_warnings
from tunelab.data.loaders import Loaded, Rejection
from tunelab.data.opened import opened_test_warnings
from tunelab.data.source_summary import across_sources, source_counts, sources_missing
from tunelab.data.split import Splits, straddling_groups, uneven_groups
from tunelab.data.usable import check_usable, more_rows, tally_sources
from tunelab.data.version import same_rows

MAX_PAIRS = 25
"""Pairs of each method listed in the report; `duplicates.counts` counts all of them and
duplicates.jsonl holds all of them."""


@dataclass
class Built:
    """One build on its way to a version: what was read, cleaned, set aside and kept."""

    spec: Spec
    lab: Path
    store: Store
    loaded: Loaded
    cleaned: Cleaned
    conflicts: Conflicts
    dedup: Dedup
    quarantine: list[Rejection]
    labels: list[str]
    seen: set[str]
    """The labels the kept rows carry (each label of a multilabel row's set)."""
    settings: dict[str, Any]
    version: str
    rows_id: str
    held_out: int
    """With data.eval_from: this build's rows kept out of train as the pinned ones."""
    guard: list
    """A forgetting guardrail's evaluation sets (`guard_sets.GuardSet`)."""
    images: dict | None
    conversations: Any
    """The conversation row check (`conversations.ConversationCheck`) of a conversation lab."""

    @property
    def multilabel(self) -> bool:
        return self.spec.task.type == "multilabel"

    @property
    def text_only(self) -> bool:
        """pretrain: the text is all a row holds."""
        return self.spec.task.generative and not self.spec.task.needs_target

    @property
    def splits(self) -> Splits:
        return self.dedup.splits

    def tally(self) -> dict[str, int]:
        """What became of every row read. With `data.eval_from`, this build's own rows kept are
        its train and the `held_out` rows that are pinned ones (validation and test are the
        pinned version's rows, which a new cleaning rule may have quarantined here)."""
        rows_read = self.loaded.rows_read
        kept = sum(len(rows) for rows in self.splits.values())
        if self.spec.data.eval_from:
            kept = len(self.splits["train"]) + self.held_out
        counts = {
            "rows_read": rows_read,
            "kept": kept,
            "quarantined": len(self.quarantine),
            "duplicates_removed": len(self.dedup.removed),
        }
        accounted = counts["kept"] + counts["quarantined"] + counts["duplicates_removed"]
        if accounted != rows_read:
            raise AssertionError(
                f"rows went missing: read {rows_read}, but kept + quarantined + removed = "
                f"{accounted}"
            )
        return counts

    def manifest(self, counts: dict[str, int]) -> dict[str, Any]:
        """What the version keeps of how it was made (`manifest.json`)."""
        data = self.spec.data
        manifest = {
            "labels": self.labels,
            "counts": (set_counts if self.multilabel else split_counts)(self.splits, self.labels),
            "rows": counts,
            "presplit": self.loaded.presplit,
            "rows_id": self.rows_id,
            "sources": tally_sources(self.loaded.sources, self.quarantine),
            "rules": rule_settings(data.cleaning),
            "eval_from": data.eval_from,
            "settings": {k: v for k, v in self.settings.items() if k not in ("labels", "cleaning")},
        }
        if self.guard:
            manifest["guard_sets"] = {g.on: g.summary() for g in self.guard}
        if self.images:
            manifest["images"] = self.images
        return manifest

    def warnings(self, manifest: dict[str, Any], long_warnings: list[str]) -> list[str]:
        """Every warning of the build; `check_usable` refuses data no lab can use first."""
        warnings = check_usable(manifest, self.spec) + long_warnings
        warnings += self._content_warnings()
        if self.guard:
            warnings += overlap_warnings(self.guard, (ex.text for ex in self.splits["train"]))
        warnings += opened_test_warnings(self.store, self.splits, self.version)
        sizes = {split: len(rows) for split, rows in self.dedup.splits.items()}
        warnings += [w for w in [held_out_copies(self.dedup.pairs, sizes)] if w]
        return warnings

    def _content_warnings(self) -> list[str]:
        """What the rows kept warn of: a group in two splits of the user's split, label
        conflicts kept, class imbalance, labels written alike, a pretrain source missing from
        validation or test."""
        spec, splits, presplit = self.spec, self.splits, self.loaded.presplit
        data, warnings = spec.data, []
        if data.fields.group is not None and presplit:
            warnings += straddling_groups(splits)
        elif data.fields.group is not None:  # whole groups: the asked shares may not be met
            warnings += uneven_groups(splits, data.split)
        if self.conflicts.groups and data.dedup.conflicts == "report":
            warnings.append(
                f"{len(self.conflicts.groups)} {'image' if spec.images else 'text'}(s) have "
                "different labels in different copies, all kept (dedup.conflicts: report); see "
                "duplicates.conflicts in the report"
            )
        if spec.task.type == "pretrain":
            warnings += sources_missing(
                splits, lambda split: more_rows(split, {"presplit": presplit}, spec)
            )
        warnings += case_warnings(self.seen)
        if not spec.task.generative:  # a class named as another is, or as an empty cell
            warnings += number_warnings(self.seen) + missing_mark_warnings(self.seen)
        if self.multilabel:  # per label, not per label set
            warnings += set_warnings(splits.get("train", []))
        elif not spec.task.generative:
            warnings += imbalance_warnings(splits.get("train", []))
        return warnings  # task.labels with no row: `usable.check_usable` says what that does

    def report(
        self,
        counts: dict[str, int],
        manifest: dict[str, Any],
        warnings: list[str],
        new: bool,
        damaged: list[str],
    ) -> dict[str, Any]:
        """The report `tunelab data` shows and the version keeps (`report.json`)."""
        data, store, dedup = self.spec.data, self.store, self.dedup
        carve = data.split.validation_from_train
        report = {
            "version": self.version,
            "new": new,
            "rewritten": damaged or None,
            **counts,
            "splits": manifest["counts"],
            "labels": self.labels,
            **({"label_sets": set_summary(self.splits)} if self.multilabel else {}),
            # pretrain reads no labels: its split table counts documents by source instead
            "by_source": source_counts(self.splits) if self.text_only else None,
            "cleaning": self.cleaned.changed,
            "quarantine": {
                "file": self._shown("quarantine.jsonl"),
                "reasons": dict(sorted(Counter(r.kind for r in self.quarantine).items())),
            },
            "duplicates": {
                "policy": data.dedup.policy,
                "engine": data.engine,
                "counts": dedup.counts(),
                "pairs": first_of_each_method(dedup.pairs, MAX_PAIRS),
                "pairs_total": len(dedup.pairs),
                "pairs_file": self._shown("duplicates.jsonl"),
                "removed": len(dedup.removed),
                "across_sources": across_sources(dedup.pairs),
            },
            "conflicts": self.conflicts.report(data.dedup.conflicts),
            "rows_id": self.rows_id,
            "same_rows_as": same_rows(store, self.rows_id, self.version),
            "presplit": self.loaded.presplit,
            "validation_from_train": (
                {"share": carve, "rows": len(self.splits["validation"]), "seed": data.split.seed}
                if carve is not None
                else None
            ),
            "eval_from": data.eval_from,
            # this build's examples kept out of train as the pinned validation and test ones
            "held_out_of_train": self.held_out if data.eval_from else None,
            "guard_sets": manifest.get("guard_sets"),
            "conversations": self._conversations(),
            "warnings": warnings,
        }
        if self.images:
            report["images"] = {**self.images, "folder": self._shown("images", self.lab)}
        return report

    def _conversations(self) -> dict | None:
        if not self.conversations:
            return None
        check = self.conversations
        rows = [ex for split in self.splits.values() for ex in split]
        return conversation_summary(rows) | {
            "sharegpt_rows": check.sharegpt,
            "content_parts_rows": check.parts,
        }

    def _shown(self, name: str, under: Path | None = None) -> str:
        """A file of this version, relative to the lab (to `under` where given) if inside."""
        path = self.store.data_dir(self.version) / name
        try:
            return path.relative_to(under or self.store.lab).as_posix()
        except ValueError:
            return str(path)


def split_counts(splits: Splits, labels: list[str]) -> dict[str, dict[str, Any]]:
    """Rows per split and, in each, per label."""
    out = {}
    for split in SPLITS:
        per_label = Counter(ex.label for ex in splits.get(split, []))
        out[split] = {
            "n": sum(per_label.values()),
            "labels": {label: per_label.get(label, 0) for label in labels},
        }
    return out


def first_of_each_method(pairs: list[dict], n: int) -> list[dict]:
    """Up to n pairs of each method (exact, near) for the report; all are in duplicates.jsonl."""
    shown: dict[str, int] = {}
    out = []
    for pair in pairs:
        if shown.get(pair["method"], 0) < n:
            shown[pair["method"]] = shown.get(pair["method"], 0) + 1
            out.append(pair)
    return out
