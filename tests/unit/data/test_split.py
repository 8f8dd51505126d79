"""Splits: deterministic, stratified, grouped, and the user's split kept when given."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from tunelab.core.spec import SplitSpec
from tunelab.data.loaders import Example
from tunelab.data.raw import DataError
from tunelab.data.split import (
    carve_validation,
    in_id_order,
    presplit_examples,
    split_examples,
    straddling_groups,
    uneven_groups,
)

SPLITS = ("train", "validation", "test")


def make_rows(per_label: dict[str, int], groups: int | None = None) -> list[Example]:
    rows = []
    for label, n in per_label.items():
        for i in range(n):
            group = f"g{i % groups}-{label}" if groups else None
            rows.append(Example(f"{label}:{i}", f"{label} text {i}", label, "f", i, group=group))
    return rows


def ids(splits: dict[str, list[Example]]) -> dict[str, list[str]]:
    return {s: [e.id for e in rows] for s, rows in splits.items()}


def test_same_seed_same_split_other_seed_different() -> None:
    rows = make_rows({"a": 40, "b": 20})
    first = split_examples(rows, SplitSpec(seed=1), grouped=False)
    again = split_examples(list(reversed(rows)), SplitSpec(seed=1), grouped=False)
    other = split_examples(rows, SplitSpec(seed=2), grouped=False)
    assert ids(first) == ids(again)
    assert ids(first) != ids(other)
    assert sorted(i for v in ids(first).values() for i in v) == sorted(e.id for e in rows)


def test_global_random_state_is_not_used() -> None:
    rows = make_rows({"a": 30, "b": 30})
    random.seed(123)
    first = split_examples(rows, SplitSpec(seed=5), grouped=False)
    random.seed(999)
    state = random.getstate()
    second = split_examples(rows, SplitSpec(seed=5), grouped=False)
    assert ids(first) == ids(second)
    assert random.getstate() == state


@pytest.mark.parametrize("seed", [0, 1, 7])
@pytest.mark.parametrize(
    ("per_label", "ratios"),
    [
        ({"a": 40, "b": 20}, (0.7, 0.15, 0.15)),
        ({"a": 17, "b": 9, "c": 5}, (0.7, 0.15, 0.15)),
        ({"a": 101, "b": 33}, (0.8, 0.1, 0.1)),
        ({"a": 23, "b": 11}, (0.5, 0.3, 0.2)),
    ],
)
def test_stratified_within_one_example_of_target(
    per_label: dict[str, int], ratios: tuple[float, float, float], seed: int
) -> None:
    spec = SplitSpec(train=ratios[0], validation=ratios[1], test=ratios[2], seed=seed)
    splits = split_examples(make_rows(per_label), spec, grouped=False)
    for split, ratio in zip(SPLITS, ratios, strict=True):
        counts = Counter(e.label for e in splits[split])
        for label, n in per_label.items():
            assert abs(counts[label] - ratio * n) <= 1, (split, label, counts[label], ratio * n)


def test_every_split_gets_every_label_when_possible() -> None:
    splits = split_examples(make_rows({"big": 50, "tiny": 3}), SplitSpec(), grouped=False)
    for split in SPLITS:
        assert {e.label for e in splits[split]} == {"big", "tiny"}
    two = split_examples(make_rows({"big": 50, "pair": 2}), SplitSpec(), grouped=False)
    pair_splits = {s for s in SPLITS for e in two[s] if e.label == "pair"}
    assert pair_splits == {"train", "validation"}


def test_unstratified_split_still_hits_the_ratios() -> None:
    rows = make_rows({"a": 90, "b": 10})
    splits = split_examples(rows, SplitSpec(stratify=False, seed=3), grouped=False)
    assert [len(splits[s]) for s in SPLITS] == [70, 15, 15]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_groups_never_straddle_splits(seed: int) -> None:
    rows = make_rows({"a": 60, "b": 30}, groups=10)
    splits = split_examples(rows, SplitSpec(seed=seed), grouped=True)
    where: dict[str, set[str]] = {}
    for split, part in splits.items():
        for e in part:
            where.setdefault(str(e.group), set()).add(split)
    assert all(len(s) == 1 for s in where.values())
    assert len(where) == 20
    for split in SPLITS:
        assert {e.label for e in splits[split]} == {"a", "b"}
    assert sum(len(v) for v in splits.values()) == 90
    assert straddling_groups(splits) == []


def test_mixed_label_groups_are_stratified_by_their_majority_label() -> None:
    # six groups mostly "a" (2 a + 1 b) and three groups mostly "b" (1 a + 2 b)
    rows = [
        Example(f"g{g}:{i}", f"t{g}{i}", label, "f", i, group=f"g{g}")
        for g in range(9)
        for i, label in enumerate(["a", "a", "b"] if g < 6 else ["a", "b", "b"])
    ]
    for seed in range(5):
        splits = split_examples(rows, SplitSpec(seed=seed), grouped=True)
        mostly_b = {s: {e.group for e in part if e.group >= "g6"} for s, part in splits.items()}
        assert [len(mostly_b[s]) for s in SPLITS] == [1, 1, 1]
        assert sum(len(part) for part in splits.values()) == 27


def test_a_groups_stratum_is_its_majority_label_ties_to_the_first() -> None:
    """The split test above passed with the minority label too: its counts came out alike."""
    from tunelab.data.split import _Unit

    def unit(*labels: str) -> _Unit:
        examples = [Example(f"g:{i}", f"t{i}", label, "f", i) for i, label in enumerate(labels)]
        return _Unit(list(range(len(labels))), examples)

    assert unit("b", "a", "b").label == "b" and unit("a", "b", "b", "c").label == "b"
    assert unit("b", "a").label == "a" and unit("c").label == "c"


def test_presplit_keeps_the_users_split_exactly() -> None:
    rows = [
        Example(f"r{i}", f"t{i}", "a", "f", i, split=s)
        for i, s in enumerate(["test", "train", "train", "validation", "train"])
    ]
    splits = presplit_examples(rows)
    assert ids(splits) == {"train": ["r1", "r2", "r4"], "validation": ["r3"], "test": ["r0"]}


def test_validation_is_carved_from_a_users_train_split_seeded_stratified_grouped() -> None:
    train = make_rows({"a": 40, "b": 20}, groups=10)
    test = [Example(f"t{i}", f"test {i}", "a", "f", i, split="test") for i in range(5)]
    users = presplit_examples(
        [*(Example(**{**_fields(e), "split": "train"}) for e in train), *test]
    )
    spec = SplitSpec(seed=3, validation_from_train=0.25)
    carved = carve_validation(users, spec, grouped=True)
    assert ids(carved)["test"] == ids(users)["test"]  # the user's test split untouched
    assert sorted(ids(carved)["train"] + ids(carved)["validation"]) == sorted(ids(users)["train"])
    labels = Counter(e.label for e in carved["validation"])
    assert 12 <= len(carved["validation"]) <= 18 and labels["a"] > labels["b"] > 0
    groups = {e.group for e in carved["validation"]}
    assert not groups & {e.group for e in carved["train"]}  # a group kept whole
    assert ids(carve_validation(users, spec, grouped=True)) == ids(carved)  # seeded
    other = carve_validation(users, SplitSpec(seed=4, validation_from_train=0.25), grouped=True)
    assert ids(other) != ids(carved)
    with pytest.raises(DataError, match="comes with its own validation split"):
        carve_validation(carved, spec, grouped=True)


def _fields(e: Example) -> dict:
    return {k: getattr(e, k) for k in ("id", "body", "label", "file", "line", "group")}


def test_a_group_in_two_splits_of_a_users_split_is_warned() -> None:
    rows = [
        Example("r1", "t", "a", "f", 1, group="g", split="train"),
        Example("r2", "t", "b", "f", 2, group="g", split="validation"),
        Example("r3", "t", "b", "f", 3, group="h", split="validation"),
    ]
    assert straddling_groups(presplit_examples(rows)) == [
        "1 group(s) appear in more than one split, e.g. ['g']"
    ]


def test_a_grouped_split_far_from_the_asked_shares_is_warned() -> None:
    """Nine groups for 60/20/20 came out 44/33/22 without a word (hV F6)."""
    asked = SplitSpec(train=0.6, validation=0.2, test=0.2)
    few = make_rows({"a": 90}, groups=4)
    splits = split_examples(few, asked, grouped=True)
    assert [len(splits[s]) for s in SPLITS] == [46, 22, 22]
    (warning,) = uneven_groups(splits, asked)
    assert warning.startswith("the split by data.fields.group gives 51/24/24% of the rows to ")
    assert "where data.split asks 60/20/20%: each of the 4 groups goes whole" in warning
    many = make_rows({"a": 90}, groups=45)  # groups of two: within a few rows of the shares
    assert uneven_groups(split_examples(many, asked, grouped=True), asked) == []


def test_rows_already_in_id_order_come_back_as_they_are_else_sorted_naturally() -> None:
    def row(row_id: str) -> Example:
        return Example(id=row_id, body="t", label="a", file="f.jsonl", line=None)

    ordered = [row(i) for i in ("f.jsonl:2", "f.jsonl:9", "f.jsonl:10", "f.jsonl:10")]
    assert in_id_order(ordered) is ordered  # no copy in the usual case
    shuffled = [row(i) for i in ("f.jsonl:10", "f.jsonl:9", "g.jsonl:1", "f.jsonl:2")]
    assert [r.id for r in in_id_order(shuffled)] == [
        "f.jsonl:2",
        "f.jsonl:9",
        "f.jsonl:10",
        "g.jsonl:1",
    ]
    assert in_id_order([]) == [] and [r.id for r in in_id_order([row("a")])] == ["a"]
