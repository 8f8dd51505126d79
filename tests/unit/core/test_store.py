import errno
import json
import os
import re
import resource

import pytest

from tunelab.core.errors import disk_full
from tunelab.core.run_names import RunNameError, check_run_name
from tunelab.core.store import (
    SealedError,
    Store,
    StoreError,
    atomic_dir,
    atomic_write_json,
    atomic_write_text,
)

FAKE = {"kind": "variant", "status": "completed", "data_version": "v1", "spec": {}}
"""What a run record holds at least (`core.records.Run`)."""


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    target = tmp_path / "a" / "record.json"
    atomic_write_json(target, {"x": 1})
    atomic_write_json(target, {"x": 2})
    assert json.loads(target.read_text()) == {"x": 2}
    assert [p.name for p in target.parent.iterdir()] == ["record.json"]


def test_run_ids_are_sequential_and_never_reused(tmp_path):
    store = Store(tmp_path)
    first, _ = store.new_run("lora")
    second, _ = store.new_run("lora")
    assert (first, second) == ("r001-lora", "r002-lora")
    store.write_record(first, {**FAKE, "id": first})
    assert [r["id"] for r in store.runs()] == [first]


def test_test_split_is_sealed(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(SealedError, match="final"):
        store.read_split("v1", "test")


def test_unknown_run_lists_known(tmp_path):
    store = Store(tmp_path)
    run_id, _ = store.new_run("probe")
    store.write_record(run_id, {**FAKE, "id": run_id})
    with pytest.raises(Exception, match="r001-probe"):
        store.run_dir("r009-nope")
    for _ in range(9):  # a lab of weeks: the newest named, not every id on one line
        run_id, _ = store.new_run("x")
        store.write_record(run_id, {**FAKE, "id": run_id})
    with pytest.raises(StoreError) as unknown:
        store.run_dir("r099-nope")
    assert str(unknown.value).endswith(
        "known runs: r003-x, r004-x, r005-x, r006-x, r007-x, r008-x, r009-x, r010-x and 2 older "
        "(`tunelab runs` lists all)"
    )


def test_a_run_is_named_by_its_id_or_its_number_alone(tmp_path):
    store = Store(tmp_path)
    for name in ("probe", "lora"):
        run_id, _ = store.new_run(name)
        store.write_record(run_id, {**FAKE, "id": run_id})
    assert store.resolve_run("r002") == "r002-lora"
    assert store.resolve_run("r001-probe") == "r001-probe"
    for given in ("r2", "r00", "lora", "r003", "../r001-probe"):
        with pytest.raises(StoreError, match=f"no run '{re.escape(given)}'.*r001-probe, r002-lora"):
            store.resolve_run(given)
    # a run folder copied in from a clone: two runs share r002, and "no run 'r002'" misled
    (store.runs_dir / "r002-beta").mkdir()
    (store.runs_dir / "r002-beta" / "record.json").write_text("{}")
    with pytest.raises(StoreError, match=r"r002 names 2 runs in .* \(r002-beta, r002-lora\)"):
        store.resolve_run("r002")


@pytest.mark.parametrize("name", ["lora", "lr-0.0001", "r_16.b", "_x", "a" * 60, "a" * 64])
def test_run_names_a_folder_can_take_are_allowed(tmp_path, name):
    store = Store(tmp_path)
    run_id, path = store.new_run(name)
    assert run_id == f"r001-{name}" and path.parent == tmp_path / ".tunelab" / "runs"
    store.write_record(run_id, {**FAKE, "id": run_id})
    assert store.run_dir(run_id) == path  # its id is longer than a name may be, and is a run's


@pytest.mark.parametrize("name", ["..", "a..b", ".hidden", "-flag", "a/b", "a b", "", "a" * 65])
def test_run_names_that_could_escape_or_hide_are_refused(tmp_path, name):
    with pytest.raises(RunNameError, match=re.escape("letters, digits, '.', '_' or '-'")):
        check_run_name(name)
    with pytest.raises(RunNameError):
        Store(tmp_path).new_run(name)
    assert not (tmp_path / ".tunelab" / "runs").exists() or not any(
        (tmp_path / ".tunelab" / "runs").iterdir()
    )


@pytest.mark.parametrize("name", ["r003", "r003-lora", "r12-x"])
def test_a_name_that_reads_as_a_run_id_is_refused(tmp_path, name):
    """`run --name r003` made r009-r003, and `invalidate r003` then took run r003-lora."""
    with pytest.raises(RunNameError, match="reads as a run id") as err:
        Store(tmp_path).new_run(name)
    assert f"`{name.split('-')[0]}` would name run {name.split('-')[0]}, not this one" in str(
        err.value
    )
    assert check_run_name("lora-r16") == "lora-r16"
    assert check_run_name("rank-4") == "rank-4" and check_run_name("r2d2x") == "r2d2x"


def test_a_run_id_that_is_a_path_is_no_run(tmp_path):
    store = Store(tmp_path)
    outside = tmp_path / "record.json"
    outside.write_text('{"id": "x"}')
    store.runs_dir.mkdir(parents=True)
    with pytest.raises(StoreError, match=re.escape("no run '../..'")):
        store.read_record("../..")


def test_a_write_cut_short_by_a_full_disk_leaves_the_old_file_and_names_the_new(tmp_path):
    target = tmp_path / "record.json"
    atomic_write_json(target, {"x": 1})
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, hard))  # Python ignores SIGXFSZ: EFBIG
    try:
        with pytest.raises(OSError) as caught:
            atomic_write_text(target, "y" * 5000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert caught.value.errno == errno.EFBIG and caught.value.filename == str(target)
    assert "file-size limit" in str(disk_full(caught.value))
    assert json.loads(target.read_text()) == {"x": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]  # no temporary left


def test_an_event_cut_short_is_taken_back_and_a_torn_line_stays_apart(tmp_path, monkeypatch):
    store = Store(tmp_path)
    store.log_event("first")
    log = store.root / "events.jsonl"
    whole = log.read_bytes()
    real_write = os.write

    def half_then_full(fd, data):
        real_write(fd, bytes(data)[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(OSError, match="No space"):
        store.log_event("second", detail="x" * 100)
    monkeypatch.undo()
    assert log.read_bytes() == whole  # the ten bytes were taken back

    with log.open("ab") as fh:  # a line torn by an older writer, without its newline
        fh.write(b'{"time": "t", "ev')
    store.log_event("third")
    assert [e["event"] for e in store.events()] == ["first", "third"]
    with pytest.raises(StoreError, match=r"events\.jsonl:2"):
        store.events(strict=True)


def fill_the_log(store: Store, monkeypatch) -> None:
    """A full disk for the event log's writes alone, from now on (until `monkeypatch.undo`)."""
    real_write = os.write

    def full(fd, data):
        if os.fstat(fd).st_ino == (store.root / "events.jsonl").stat().st_ino:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)


def test_a_record_whose_line_a_full_disk_stopped_stays_as_the_log_vouches(tmp_path, monkeypatch):
    """A full disk while the event line was appended left the new record in place and no line
    for it: every later command took the lab's past for edited, and only `fsck --repair`
    (a break in the log, for good) let it go on."""
    store = Store(tmp_path)
    run_id, run_dir = store.new_run("x")
    record = {"id": run_id, "kind": "variant", "status": "running", "data_version": "v1"}
    store.write_record(run_id, record | {"spec": {}})
    before = (run_dir / "record.json").read_bytes()
    fill_the_log(store, monkeypatch)
    done = record | {"spec": {}, "status": "completed"}
    with pytest.raises(OSError, match="No space"):
        store.write_record(run_id, done)
    monkeypatch.undo()
    assert (run_dir / "record.json").read_bytes() == before  # as its last line wrote it
    assert sorted(p.name for p in run_dir.iterdir()) == ["record.json"]  # nothing staged left
    assert store.audit()["records"] == []
    store.write_record(run_id, done | {"spec": {}})
    assert store.read_record(run_id)["status"] == "completed" and store.audit()["records"] == []


def test_a_folder_appears_whole_or_not_at_all(tmp_path):
    target = tmp_path / "weights"
    with pytest.raises(RuntimeError), atomic_dir(target) as folder:
        (folder / "a.safetensors").write_text("part")
        raise RuntimeError("killed half-way")
    assert list(tmp_path.iterdir()) == []  # neither the folder nor its temporary

    with atomic_dir(target) as folder:
        (folder / "a.safetensors").write_text("old")
    with atomic_dir(target, replace=True) as folder:
        (folder / "b.safetensors").write_text("new")
    assert [p.name for p in tmp_path.iterdir()] == ["weights"]
    assert [p.name for p in target.iterdir()] == ["b.safetensors"]


def test_a_missing_data_version_says_how_to_get_it_back(tmp_path):
    with pytest.raises(StoreError, match="missing its manifest") as err:
        Store(tmp_path).data_manifest("0123456789ab")
    assert "run `tunelab data` with the sources and spec that built it" in str(err.value)


def test_a_copy_that_fills_the_disk_names_the_file_it_was_writing():
    """An export's copy of a run's weights failed for want of space and the message named the
    run's weights (only read) as the file being written."""
    from tunelab.core.errors import no_permission

    copy = OSError(errno.ENOSPC, "No space left on device", "runs/r003/weights/model.safetensors")
    copy.filename2 = "bundles/.r003.tmp/model.safetensors"
    said = str(disk_full(copy))
    assert "while writing bundles/.r003.tmp/model.safetensors" in said and "runs/" not in said
    refused = OSError(errno.EROFS, "Read-only file system", "lab/.tunelab/events.jsonl")
    assert str(no_permission(refused)).startswith("lab/.tunelab/events.jsonl: Read-only")


def test_a_save_killed_between_its_line_and_its_rename_is_finished_not_called_an_edit(
    tmp_path, monkeypatch
):
    """A kill there left the log vouching for the staged file while the record kept its old
    content (or a numbered record its empty reservation): every command refused the lab as
    edited, and fsck advised deleting the one whole copy."""
    import shutil

    import tunelab.core.store as store_module

    store = Store(tmp_path)
    run_id, run_dir = store.new_run("x")
    record = {"id": run_id, "kind": "variant", "status": "running", "data_version": "v1"}
    record |= {"task": "classification", "created": "2026-12-07T00:00:00"}
    store.write_record(run_id, record | {"spec": {}})
    before = (run_dir / "record.json").read_bytes()
    killed = run_dir / ".record.json.k1ll3d.tmp"  # the staged file a kill leaves behind
    monkeypatch.setattr(store_module, "commit", lambda tmp, path: shutil.copy(tmp, killed))
    store.write_record(run_id, record | {"spec": {}, "status": "invalid"})
    monkeypatch.undo()
    assert (run_dir / "record.json").read_bytes() == before and killed.exists()
    decoy = run_dir / ".record.json.other.tmp"  # a staged file the log does not vouch for
    decoy.write_bytes(before)
    from tunelab.core.ledger import listing

    staged = killed.read_bytes()
    (row,) = listing(store)  # `tunelab runs`: finished before it is read, not after
    assert row["status"] == "invalid" and row["doubt"] is None
    (run_dir / "record.json").write_bytes(before)  # as the kill left it, for the audit below
    killed.write_bytes(staged)

    state = store.audit()
    assert state["records"] == [] and state["finished"] == [f".tunelab/runs/{run_id}/record.json"]
    assert store.read_record(run_id)["status"] == "invalid" and not killed.exists()
    assert decoy.exists()  # left for fsck to name
    assert store.audit()["finished"] == []  # done once


def test_a_save_that_fails_gives_its_reserved_number_back(tmp_path, monkeypatch):
    """A refused or full-disk `compare` left an empty `c002.json` (and `run` an empty run
    folder) while saying nothing was written; fsck then named them as leftovers (hS F4)."""
    store = Store(tmp_path)
    store.log_event("data")
    _, path = store.reserve("comparisons", "c")
    with pytest.raises(StoreError, match="not a comparison record"):
        store.save(path, {"id": "c001"}, "compare")
    assert not path.exists()
    fill_the_log(store, monkeypatch)

    from types import SimpleNamespace

    import torch

    from tunelab.core import ledger
    from tunelab.core.spec import validate_spec

    spec = validate_spec(
        {
            "hypothesis": {"behaviour": "b", "metric": "accuracy", "min_effect": 0.02},
            "guardrails": [{"metric": "accuracy", "scope": "overall", "max_drop": 0.1}],
            "data": {"sources": [{"type": "jsonl", "path": "d"}]},
            "model": {"path": "m"},
        }
    )
    lab = SimpleNamespace(store=store, spec=spec, device=torch.device("cpu"))
    with pytest.raises(OSError, match="No space"):
        ledger.open_run(lab, "lora", "variant", "v1")
    monkeypatch.undo()
    assert [p.name for p in store.runs_dir.iterdir()] == [".lock"]  # the folder's lock alone
    assert store.new_run("lora")[0] == "r001-lora"  # the number was given back, not skipped
