"""The store's records: declared shapes, their hash in the log, numbered order, the format."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from tunelab.core import layout
from tunelab.core.records import SHAPES, shape_of
from tunelab.core.store import NewerFormatError, Store, StoreError, read_json

RUN = {
    "id": "r001-lora",
    "name": "lora",
    "kind": "variant",
    "status": "completed",
    "created": "2026-12-03T10:00:00+00:00",
    "updated": "2026-12-03T10:00:00+00:00",
    "data_version": "v1",
    "task": "classification",
    "spec": {"task": {"type": "classification"}},
    "method": "lora",
    "metrics": {"accuracy": 0.9},
    "weights": {"dir": "weights", "files": ["adapter_model.safetensors"], "sha256": {}},
}
EXAMPLES = {
    "runs/r001-lora/record.json": RUN,
    "comparisons/c001.json": {
        "id": "c001",
        "created": "t",
        "file": ".tunelab/comparisons/c001.json",
        "inputs": [{"run": "r001-lora", "predictions_sha256": "ab" * 32}],
        "runs": [{"id": "r001-lora", "verdict": "improved"}],
        "reference": "r001-lora",
    },
    "groups/g001.json": {
        "id": "g001",
        "kind": "replicates",
        "name": "lora",
        "created": "t",
        "base_seed": 7,
        "seeds": [7, 8],
        "members": [{"index": 0, "seed": 7, "run": "r001-lora", "trained": True}],
    },
    "noise/n001.json": {
        "id": "n001",
        "created": "t",
        "file": ".tunelab/noise/n001.json",
        "of": "r001-lora",
        "group": "g001",
    },
    "plans/p001.json": {
        "id": "p001",
        "created": "t",
        "file": ".tunelab/plans/p001.json",
        "days": 3,
        "device": "cuda",
        "phases": [],
    },
    "finals/1-r001-lora.json": {
        "n": 1,
        "run": "r001-lora",
        "data_version": "v1",
        "test_sha256": "cd" * 32,
        "file": ".tunelab/finals/1-r001-lora.json",
        "metrics": {"accuracy": 0.8},
    },
    "exports/1-r001-lora.json": {
        "run": "r001-lora",
        "bundle": "bundles/r001-lora",
        "file": ".tunelab/exports/1-r001-lora.json",
        "created": "t",
        "verified": None,
    },
    "checks/v1-abc.json": {
        "passed": True,
        "items": [],
        "data_version": "v1",
        "spec_hash": "abc",
        "file": ".tunelab/checks/v1-abc.json",
        "created": "t",
    },
    "sizing/v1-abc.json": {
        "data_version": "v1",
        "spec_hash": "abc",
        "model": {"path": "m", "dtype": "float32", "model_kind": "encoder"},
        "created": "t",
        "file": ".tunelab/sizing/v1-abc.json",
    },
}


def test_every_record_kind_has_an_example_here():
    assert {shape_of(Path(p)) for p in EXAMPLES} == set(SHAPES.values())


@pytest.mark.parametrize("relative", sorted(EXAMPLES))
def test_each_record_kind_round_trips_through_its_shape(tmp_path, relative):
    store = Store(tmp_path)
    path = store.root / relative
    store.save(path, dict(EXAMPLES[relative]), "test")
    assert store.load(path) == EXAMPLES[relative] | {"store_format": layout.STORE_FORMAT}
    (event,) = [e for e in store.events() if e["event"] == "test"]
    assert event["record"] == f".tunelab/{relative}" and len(event["record_sha256"]) == 64


@pytest.mark.parametrize("relative", sorted(EXAMPLES))
def test_a_record_missing_a_declared_field_is_refused_naming_it(tmp_path, relative):
    store = Store(tmp_path)
    record = dict(EXAMPLES[relative])
    field = next(iter(record))
    del record[field]
    with pytest.raises(StoreError, match=rf"{relative}.*{field}"):
        store.save(store.root / relative, record, "test")
    assert not (store.root / relative).exists()


def test_a_wrong_type_is_refused_when_read_back(tmp_path):
    store = Store(tmp_path)
    store.write_record("r001-lora", dict(RUN))
    path = store.runs_dir / "r001-lora" / "record.json"
    path.write_text(json.dumps(read_json(path) | {"status": "done"}))
    with pytest.raises(StoreError, match=r"record.json.*status"):
        store.read_record("r001-lora")


def test_an_edited_record_is_named_with_the_line_that_wrote_it(tmp_path):
    store = Store(tmp_path)
    store.write_record("r001-lora", dict(RUN), "run_completed")
    store.log_event("later")
    path = store.runs_dir / "r001-lora" / "record.json"
    path.write_text(path.read_text().replace("0.9", "0.95"))
    audit = store.audit()
    assert audit["problems"] == []  # the log itself is intact
    (problem,) = audit["records"]
    assert problem["record"] == ".tunelab/runs/r001-lora/record.json"
    assert "changed after line 1" in problem["problem"]
    with pytest.raises(StoreError, match=r"runs/r001-lora/record.json changed after line 1"):
        store.require_intact_log("compare")


def test_a_record_saved_again_is_judged_by_its_newest_event(tmp_path):
    store = Store(tmp_path)
    store.write_record("r001-lora", dict(RUN | {"status": "running"}), "run_started")
    store.write_record("r001-lora", dict(RUN), "run_completed")
    assert store.audit()["records"] == [] and store.audit()["records_hashed"] == 1


def _finals(store: Store, n: int) -> None:
    for i in range(1, n + 1):
        record = EXAMPLES["finals/1-r001-lora.json"] | {"n": i, "metrics": {"accuracy": i}}
        store.save(store.path(layout.FINALS, f"{i}-r001-lora.json"), record, "final_result")


def test_numbered_records_are_read_in_the_order_of_their_numbers(tmp_path):
    store = Store(tmp_path)
    _finals(store, 12)
    assert [r["n"] for r in store.records(layout.FINALS)] == list(range(1, 13))


def test_ids_are_one_past_the_highest_and_never_reused(tmp_path):
    store = Store(tmp_path)
    assert store.reserve(layout.COMPARISONS, "c")[0] == "c001"
    (store.path(layout.COMPARISONS) / "c009.json").write_text("{}")
    assert store.reserve(layout.COMPARISONS, "c")[0] == "c010"
    assert store.reserve(layout.EXPORTS, suffix="-r001-lora", width=0)[0] == "1-r001-lora"
    assert store.reserve(layout.EXPORTS, suffix="-r002-full", width=0)[0] == "2-r002-full"
    assert store.new_run("lora")[0] == "r001-lora"


def _reserve_many(lab: str, queue) -> None:
    store = Store(Path(lab))
    queue.put([store.reserve(layout.EXPORTS, suffix="-x", width=0)[0] for _ in range(10)])


def test_reservations_from_processes_at_once_never_collide(tmp_path):
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_reserve_many, args=(str(tmp_path), queue)) for _ in range(4)]
    for p in procs:
        p.start()
    ids = [i for _ in procs for i in queue.get(timeout=60)]
    for p in procs:
        p.join(timeout=60)
    assert sorted(ids, key=lambda i: int(i.split("-")[0])) == [f"{n}-x" for n in range(1, 41)]


def test_a_new_store_records_its_format_at_its_first_event(tmp_path):
    store = Store(tmp_path)
    assert store.format["format"] == 1 and not (store.root / layout.FORMAT).exists()
    store.log_event("init")
    found = read_json(store.root / layout.FORMAT)
    assert found["format"] == layout.STORE_FORMAT and "upgraded_from" not in found


def test_a_format_1_lab_is_read_as_it_is_and_upgraded_from_its_next_line(tmp_path):
    root = tmp_path / layout.STORE_DIR
    root.mkdir()
    (root / layout.EVENTS).write_text('{"time": "t", "event": "data"}\n' * 3)
    store = Store(tmp_path)
    assert store.format == {"format": 1} and len(store.events()) == 3
    store.log_event("run_started")
    found = read_json(root / layout.FORMAT)
    assert found["upgraded_from"] == 1 and found["since_line"] == 4


def test_a_lab_in_a_newer_format_is_refused_before_anything_is_written(tmp_path):
    root = tmp_path / layout.STORE_DIR
    root.mkdir()
    newer = layout.STORE_FORMAT + 1
    (root / layout.FORMAT).write_text(json.dumps({"format": newer, "tunelab": "9.0"}))
    with pytest.raises(NewerFormatError, match=rf"format {newer}.*up to {layout.STORE_FORMAT}"):
        Store(tmp_path)
    assert sorted(p.name for p in root.iterdir()) == [layout.FORMAT]


def test_a_damaged_format_record_says_what_to_do(tmp_path):
    root = tmp_path / layout.STORE_DIR
    root.mkdir()
    (root / layout.FORMAT).write_text("not json")
    with pytest.raises(StoreError, match=r"format\.json: not a store format record"):
        Store(tmp_path)


def test_the_format_is_claimed_once_however_many_stores_were_open(tmp_path):
    root = tmp_path / layout.STORE_DIR
    root.mkdir()
    (root / layout.EVENTS).write_text('{"time": "t", "event": "data"}\n')
    first, second = Store(tmp_path), Store(tmp_path)  # both opened while it was format 1
    first.log_event("run_started")
    second.log_event("run_completed")
    assert read_json(root / layout.FORMAT)["since_line"] == 2


def test_a_new_record_is_numbered_and_written_in_one_go(tmp_path, monkeypatch):
    store = Store(tmp_path)
    record = dict(EXAMPLES["exports/1-r001-lora.json"])
    first = store.save_new(
        layout.EXPORTS, lambda p: record | {"file": p.name}, "export", suffix="-r001-lora", width=0
    )
    assert first["file"] == "1-r001-lora.json"

    def killed(path):  # a kill while the record is built: no file, empty or not, is left
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.save_new(layout.EXPORTS, killed, "export", suffix="-r002-x", width=0)
    assert [p.name for p in store.numbered(layout.EXPORTS)] == ["1-r001-lora.json"]
    assert sorted(p.name for p in store.path(layout.EXPORTS).glob("*.json")) == ["1-r001-lora.json"]
