"""Label conflicts: the same text (after normalisation), conversation prompt, or image, with
different answers.

Such copies are not duplicates to thin out: one of them is wrongly labelled, and keeping "the
first" keeps the wrong one as often as not. Every copy of a conflicting text goes to
quarantine (`dedup.conflicts: quarantine`, the default) with the answers seen and the ids of
the other copies, or all are kept and listed (`report`). The answer is the label for a
classifier and the target for a generative task. Copies that agree are left to the
duplicate detectors (`dedup.py`), which keep the first copy by natural id order.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tunelab.data.loaders import Example, Rejection

SHOWN = 10
"""Conflict groups listed in the report; the quarantine file holds every row."""


@dataclass
class Conflicts:
    kept: list[Example]
    rejections: list[Rejection] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)

    def report(self, policy: str) -> dict[str, Any]:
        return {
            "policy": policy,
            "groups": len(self.groups),
            "rows": sum(len(g["ids"]) for g in self.groups),
            "examples": self.groups[:SHOWN],
        }


def answer_of(ex: Example, generative: bool) -> str:
    if generative:
        return json.dumps(ex.target, sort_keys=True, ensure_ascii=False)
    return ex.label


def _shown(answers: list[str], ex: Example) -> str:
    """The answers as the user wrote them: a multilabel row's sets as lists, not as the JSON
    strings they are compared by (`['["sport"]', '["tech"]']`)."""
    if ex.label_set is not None:
        return ", ".join(answers)
    return str(answers)


def _what(ex: Example) -> str:
    if ex.image is not None:
        return "picture"
    return "prompt (the turns before the answer)" if ex.messages is not None else "text"


def find_conflicts(examples: list[Example], generative: bool, policy: str) -> Conflicts:
    """Group by normalised text (an image: by its pixels, `content.content_key`); a group with
    more than one answer is a conflict."""
    by_text: dict[bytes, list[Example]] = defaultdict(list)
    for ex in examples:
        by_text[ex.content_digest].append(ex)
    bad: set[str] = set()
    out = Conflicts(kept=[])
    for copies in by_text.values():
        answers = sorted({answer_of(ex, generative) for ex in copies})
        if len(answers) < 2:
            continue
        ids = sorted((ex.id for ex in copies), key=lambda i: Example.sort_key_of(i))
        out.groups.append({"answers": answers, "ids": ids, "origins": [ex.origin for ex in copies]})
        if policy == "quarantine":
            bad.update(ex.id for ex in copies)
            for ex in copies:
                others = [i for i in ids if i != ex.id]
                out.rejections.append(
                    ex.reject(
                        "label_conflict",
                        f"the same {_what(ex)} has {len(answers)} "
                        f"different answers {_shown(answers, ex)} "
                        f"(other copies: {', '.join(others[:5])})",
                    )
                )
    out.kept = [ex for ex in examples if ex.id not in bad]
    return out
