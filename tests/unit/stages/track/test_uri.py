"""Which MLflow store `track` writes to: a new local SQLite store appears whole or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunelab.stages.track.uri import Target, _created_whole


class _Stopped:
    """MLflow's client as far as `_created_whole` uses it: its first read creates the store's
    tables, and here a Ctrl-C lands in the middle."""

    def __init__(self, tracking_uri: str):
        self.path = Path(tracking_uri.removeprefix("sqlite:///"))

    def search_experiments(self, max_results: int):
        self.path.write_bytes(b"half of the tables")
        raise KeyboardInterrupt


class _Made(_Stopped):
    def search_experiments(self, max_results: int):
        self.path.write_bytes(b"every table")


def test_a_new_sqlite_store_appears_whole_or_not_at_all(tmp_path):
    """A `track` stopped while MLflow built the lab's mlflow.db left one every later `track`
    refused ("table scorers already exists")."""
    db = tmp_path / "mlflow.db"
    target = Target(f"sqlite:///{db}", "sqlite", None, "the default")
    with pytest.raises(KeyboardInterrupt):
        _created_whole(target, _Stopped)
    assert list(tmp_path.iterdir()) == []  # nothing half-made left, at its place or beside it
    _created_whole(target, _Made)
    assert db.read_bytes() == b"every table" and [p.name for p in tmp_path.iterdir()] == [db.name]
    _created_whole(target, _Stopped)  # a store that exists is MLflow's to open as it is
    assert db.read_bytes() == b"every table"


def test_a_killed_tracks_staged_store_is_removed_and_a_running_ones_kept(tmp_path):
    import os

    db = tmp_path / "mlflow.db"
    gone = [tmp_path / ".mlflow.db.999999999.tmp", tmp_path / ".mlflow.db.999999999.tmp-journal"]
    running = tmp_path / f".mlflow.db.{os.getppid()}.tmp"  # a live process's, writing
    for path in [*gone, running]:
        path.write_bytes(b"staged")
    _created_whole(Target(f"sqlite:///{db}", "sqlite", None, "the default"), _Made)
    assert not any(p.exists() for p in gone) and running.exists() and db.exists()


def test_a_store_another_track_made_meanwhile_is_kept_not_replaced(tmp_path):
    """Two `track`s into one new URI: the second's finished copy had been renamed over the
    store the first was already writing into, and the first's runs were lost."""
    db = tmp_path / "mlflow.db"

    class _Raced(_Made):
        def search_experiments(self, max_results: int):
            super().search_experiments(max_results)
            db.write_bytes(b"the other's store, runs in it")  # made while this one staged

    _created_whole(Target(f"sqlite:///{db}", "sqlite", None, "the default"), _Raced)
    assert db.read_bytes() == b"the other's store, runs in it"
    assert [p.name for p in tmp_path.iterdir()] == [db.name]  # the staged copy is gone


def test_a_folder_of_other_files_is_not_taken_for_a_file_store(tmp_path):
    """`--mlflow docs` (or `.`) wrote MLflow's tree among the user's own files."""
    from tunelab.stages.track.uri import TrackError, resolve

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.txt").write_text("mine")
    with pytest.raises(TrackError, match=r"holds other files and is not an MLflow file store"):
        resolve(tmp_path, str(docs))
    assert list(docs.iterdir()) == [docs / "notes.txt"]
    assert resolve(tmp_path, str(tmp_path / "new")).kind == "file"  # a new folder
    (tmp_path / "empty").mkdir()
    assert resolve(tmp_path, str(tmp_path / "empty")).kind == "file"
    (docs / ".trash").mkdir()  # MLflow's own file store: taken
    assert resolve(tmp_path, str(docs)).kind == "file"
