"""`core.files`: a folder written whole refuses, in words, to land where another command's
folder landed meanwhile."""

from __future__ import annotations

import pytest

from tunelab.core.errors import TunelabError
from tunelab.core.files import atomic_dir


def test_a_folder_another_command_wrote_meanwhile_is_a_clear_refusal(tmp_path):
    """Two exports of one run at once: the second's rename failed with 'Directory not empty',
    an internal error."""
    target = tmp_path / "bundles" / "r003-lora"
    refused = pytest.raises(TunelabError, match="written by another command while this one")
    with refused, atomic_dir(target) as folder:
        (folder / "a.txt").write_text("mine")
        target.mkdir(parents=True)
        (target / "b.txt").write_text("theirs")  # the other export finished first
    assert [p.name for p in target.iterdir()] == ["b.txt"]
    assert [p.name for p in target.parent.iterdir()] == ["r003-lora"]  # no temporary left
