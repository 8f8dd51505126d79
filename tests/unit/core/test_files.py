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


def test_a_folder_s_files_take_the_umask_s_mode_whatever_wrote_them(tmp_path):
    """safetensors writes owner-only (0600): a handed-over bundle's weights were the one file
    a server running as another user could not read."""
    import os

    import torch
    from safetensors.torch import save_file

    from tunelab.core.files import _UMASK

    with atomic_dir(tmp_path / "bundle") as folder:
        save_file({"w": torch.zeros(2)}, str(folder / "model.safetensors"))
        (folder / "README.md").write_text("card")
    for name in ("model.safetensors", "README.md"):
        assert os.stat(tmp_path / "bundle" / name).st_mode & 0o777 == 0o666 & ~_UMASK


def test_a_record_and_a_log_line_are_fsynced_before_they_count(tmp_path, monkeypatch):
    """A record's bytes are fsynced before the rename puts them in place and the folder after
    it; a log line with its folder: a power cut then leaves the old record or the new, and no
    line the log lost (only checkpoints had a test of it)."""
    import os

    from tunelab.core.files import append_line, atomic_write_text

    synced: list[str] = []
    real = os.fsync

    def spy(fd):
        where = os.readlink(f"/proc/self/fd/{fd}")
        synced.append(os.path.relpath(where, tmp_path) + ("*" if os.path.exists(where) else ""))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    atomic_write_text(tmp_path / "record.json", "{}")
    (record, folder) = synced
    assert record.startswith(".record.json.") and record.endswith(".tmp*")  # the temporary
    assert folder == ".*" and (tmp_path / "record.json").read_text() == "{}"
    synced.clear()
    append_line(tmp_path / "events.jsonl", "{}")
    assert synced == ["events.jsonl*", ".*"]
