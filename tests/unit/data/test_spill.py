"""The texts past the data step's memory budget wait in a scratch file (`data/spill.py`): the
same texts read back, the budget kept, the file made only when needed and always removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunelab.data.example import Example
from tunelab.data.spill import Spilled, Texts, text_spill

TEXTS = ["plain", "é and ü", "汉字 " * 300, "emoji 🙂", "x" * 5000, "last one"]


def examples(spill) -> list[Example]:
    return [Example(f"f:{i}", spill.hold(t), "a", "f", i) for i, t in enumerate(TEXTS)]


def test_texts_past_the_budget_wait_on_disk_and_read_back_the_same(tmp_path: Path) -> None:
    with text_spill(tmp_path / "data", budget_mb=500 / 2**20) as spill:  # 500 characters
        rows = examples(spill)
        kinds = [type(ex.body) for ex in rows]
        assert kinds[:2] == [str, str] and set(kinds[2:]) == {Spilled}  # past it from the 3rd
        spill.hold_all(rows)
        assert all(isinstance(ex.body, Spilled) for ex in rows)
        assert [ex.text for ex in rows] == TEXTS
        assert Texts(rows)[1:4] == TEXTS[1:4] and Texts(rows)[5] == TEXTS[5]
        assert len(Texts(rows)) == len(TEXTS)
        files = list((tmp_path / "data").glob(".texts-*.tmp"))
        assert len(files) == 1
        assert spill.summary()["spilled"] is True
    assert not files[0].exists()


def test_under_the_budget_nothing_is_written(tmp_path: Path) -> None:
    with text_spill(tmp_path / "data", budget_mb=1) as spill:
        rows = examples(spill)
        spill.hold_all(rows)
        assert [ex.body for ex in rows] == TEXTS  # the strings themselves
        assert spill.summary() == {"budget_mb": 1.0, "spilled": False, "spilled_mb": 0.0}
    assert not (tmp_path / "data").exists()  # not even the folder: a refused step leaves none


def test_the_scratch_file_is_removed_when_the_step_fails(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), text_spill(tmp_path, budget_mb=1e-6) as spill:
        examples(spill)[0].text  # noqa: B018  (read back once: the file exists)
        raise RuntimeError("a stage failed")
    assert not list(tmp_path.glob(".texts-*"))


def test_a_place_is_one_integer_read_only_while_its_spill_is_open(tmp_path: Path) -> None:
    with text_spill(tmp_path, budget_mb=0) as spill:
        rows = examples(spill)
        places = [ex.body for ex in rows]
        assert all(type(p) is int for p in places)  # no object per row: offset and size
        assert [p & 0xFFFFFFFF for p in places] == [len(t.encode()) for t in TEXTS]
        with pytest.raises(RuntimeError, match="already open"), text_spill(tmp_path, 1):
            pass
        assert rows[3].text == TEXTS[3]  # the refused second spill left this one open
    with pytest.raises(RuntimeError, match="after its data step had ended"):
        rows[3].text  # noqa: B018
