"""Every lab a released store format wrote is still read, and found clean, by today's tunelab.

`tests/fixtures/lab-format<N>/` are labs written by `tests/fixtures/make_lab.py` in format N;
a change to the store that this tunelab cannot read in them fails here, before a user's lab."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import tl
from tunelab.core.layout import STORE_FORMAT
from tunelab.core.store import Store

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
LABS = sorted(FIXTURES.glob("lab-format*"))


def test_todays_format_has_its_fixture_lab():
    assert FIXTURES / f"lab-format{STORE_FORMAT}" in LABS


@pytest.mark.parametrize("fixture", LABS, ids=[p.name for p in LABS])
def test_a_fixture_lab_is_read_and_found_clean(fixture, tmp_path, capsys):
    lab = tmp_path / "lab"
    shutil.copytree(fixture, lab)
    store = Store(lab)
    assert store.format["format"] <= STORE_FORMAT
    runs = store.runs()
    assert [r["kind"] for r in runs].count("variant") == 1 and len(store.comparisons()) == 1
    code, found = tl(capsys, "fsck", "--lab", str(lab))
    assert code == 0 and found["passed"], found["problems"]
    assert found["checked"]["records"] >= len(runs) + 1
    code, listed = tl(capsys, "runs", "--lab", str(lab))
    assert code == 0 and {r["id"] for r in listed} == {r["id"] for r in runs}
    code, compared = tl(capsys, "compare", "--lab", str(lab))  # judges from it again
    assert code == 0 and compared["reference"] == store.comparisons()[0]["reference"]
