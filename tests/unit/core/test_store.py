import json

import pytest

from tunelab.core.store import SealedError, Store, atomic_write_json


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
    store.write_record(first, {"id": first, "status": "completed"})
    assert [r["id"] for r in store.runs()] == [first]


def test_test_split_is_sealed(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(SealedError, match="final"):
        store.read_split("v1", "test")


def test_unknown_run_lists_known(tmp_path):
    store = Store(tmp_path)
    run_id, _ = store.new_run("probe")
    store.write_record(run_id, {"id": run_id})
    with pytest.raises(Exception, match="r001-probe"):
        store.run_dir("r009-nope")
