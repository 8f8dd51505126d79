"""A variant that gives every validation example the same answer: it separates none of them.

A classifier's new head that never left its start does this (in a multilabel lab, every label
for every example at the threshold chosen on validation; in a one-label lab, one class), and
its metrics alone read as a weak model, not as one that learned nothing. The warning names the
answer, so the user looks at the head's training before reading the verdict.
"""

from __future__ import annotations

from collections.abc import Callable


def _key(answer) -> tuple | str:
    return tuple(sorted(answer)) if isinstance(answer, list) else answer


def _shown(answer, labels: list[str]) -> str:
    if not isinstance(answer, list):
        return repr(answer)
    if not answer:
        return "no label"
    if len(answer) == len(labels) > 1:
        return f"all {len(labels)} labels"
    return "the labels " + ", ".join(sorted(answer))


def collapse_warnings(
    arm: list[dict], preds_of: Callable[[str], dict[str, dict]], labels: list[str]
) -> list[str]:
    """One warning per run of `arm` (a classification or multilabel variant's seeds) whose
    predictions are one answer for every validation example while the gold has several."""
    out = []
    for run in arm:
        preds = list(preds_of(run["id"]).values())
        if len(preds) < 2 or "predicted" not in preds[0]:  # generated text, scored documents
            continue
        answers = {_key(p["predicted"]) for p in preds}
        gold = {_key(p["gold"]) for p in preds}
        if len(answers) == 1 and len(gold) > 1:
            out.append(
                f"{run['id']} gives all {len(preds)} validation examples one answer "
                f"({_shown(preds[0]['predicted'], labels)}) where they have {len(gold)} "
                f"different ones: it separates none of them. {_why(run)}"
            )
    return out


def _why(run: dict) -> str:
    """What to try: a new head that never left its start, or one from a probe that training
    undid (its loss rising from the probe's, or its start lost to dropout)."""
    if ((run.get("trainable") or {}).get("head_init") or {}).get("from", "").startswith("probe"):
        return (
            "Its head started from a probe, so training moved it there: look at the run's "
            "training loss (a smaller training.lr, or method.head_init: new)"
        )
    return (
        "A new head that has not left its start does this: more steps, a larger learning "
        "rate, or method.head_init: probe"
    )
