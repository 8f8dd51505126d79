"""Commands that write one lab at the same moment: distinct ids, whole chained log lines, every
record matching its hash, and a lab that `tunelab fsck` calls clean, trial after trial.

The fast test starts processes that write as `run` and `data` do (the store's own calls, and
the real data step), 20 trials; the slow one runs the real commands side by side once."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

from tunelab.core.digest import sha256_file
from tunelab.core.lab import open_lab
from tunelab.core.layout import PREDICTIONS, WEIGHTS
from tunelab.core.store import Store, atomic_dir, write_jsonl
from tunelab.data import build_data
from tunelab.stages.fsck import fsck

TRIALS = 20


def _as_run(lab: str, name: str, version: str, start) -> None:
    """The store's side of `tunelab run`: a reserved id, a running record, predictions and
    weights with their hashes, the completed record."""
    start.wait()
    store = Store(Path(lab))
    run_id, run_dir = store.new_run(name)
    record = {
        "id": run_id,
        "name": name,
        "kind": "variant",
        "status": "running",
        "created": "t",
        "data_version": version,
        "task": "classification",
        "spec": {},
        "method": "lora",
    }
    store.write_record(run_id, record, "run_started", kind="variant")
    for step in range(3):
        store.log_event("step", run=run_id, step=step)
    write_jsonl(run_dir / PREDICTIONS, [{"id": i, "pred": name} for i in range(20)])
    with atomic_dir(run_dir / WEIGHTS) as folder:
        (folder / "adapter_model.safetensors").write_bytes(name.encode() * 1000)
    weights = {
        "adapter_model.safetensors": sha256_file(run_dir / WEIGHTS / "adapter_model.safetensors")
    }
    record |= {
        "status": "completed",
        "metrics": {"accuracy": 0.5},
        "predictions_sha256": sha256_file(run_dir / PREDICTIONS),
        "weights": {"dir": WEIGHTS, "files": list(weights), "sha256": weights},
    }
    store.write_record(run_id, record, "run_completed")


def _as_data(lab: str, start) -> None:
    """`tunelab data` with another cleaning rule: a new version made current."""
    start.wait()
    opened = open_lab(Path(lab), {"data.cleaning": [{"rule": "lowercase"}]}, device="cpu")
    build_data(opened.spec, opened.path, opened.store)


def test_runs_and_a_data_step_at_once_leave_a_clean_lab(make_lab, tmp_path):
    ctx = multiprocessing.get_context("fork")
    lab = make_lab()
    opened = open_lab(lab, device="cpu")
    version = build_data(opened.spec, opened.path, opened.store)["version"]
    for trial in range(TRIALS):
        start = ctx.Event()
        procs = [
            ctx.Process(target=_as_run, args=(str(lab), f"a{trial}", version, start)),
            ctx.Process(target=_as_run, args=(str(lab), f"b{trial}", version, start)),
            ctx.Process(target=_as_run, args=(str(lab), f"c{trial}", version, start)),
        ]
        if trial % 2 == 0:
            procs.append(ctx.Process(target=_as_data, args=(str(lab), start)))
        for p in procs:
            p.start()
        start.set()
        for p in procs:
            p.join(timeout=120)
        assert [p.exitcode for p in procs] == [0] * len(procs), f"trial {trial}"
        found = fsck(lab)
        assert found["passed"], f"trial {trial}: {found['problems']}"
    runs = Store(lab).runs()
    assert len(runs) == 3 * TRIALS == len({r["id"] for r in runs})
    numbers = sorted(int(r["id"][1:4]) for r in runs)
    assert numbers == list(range(1, 3 * TRIALS + 1))  # no id taken twice, none skipped
    manifests = len(list((lab / ".tunelab" / "data").glob("*/manifest.json")))
    assert manifests == 2  # the first version and the lowercased one
    assert found["checked"]["records"] == 3 * TRIALS + manifests  # each vouched for by the log


@pytest.mark.slow
def test_two_real_runs_and_a_data_step_side_by_side(make_lab, capsys):
    """The commands themselves, started together: each run trains on the version it read, its
    record says which, and fsck calls the lab clean."""
    lab = make_lab()
    tunelab = [sys.executable, "-m", "tunelab.cli"]
    subprocess.run([*tunelab, "data", "--lab", str(lab)], check=True, capture_output=True)
    subprocess.run([*tunelab, "baseline", "--lab", str(lab)], check=True, capture_output=True)
    version = Store(lab).current_data()
    procs = [
        subprocess.Popen([*tunelab, "run", "--lab", str(lab), "--name", n, "--json"], stdout=-1)
        for n in ("one", "two")
    ]
    data = subprocess.run(
        [*tunelab, "data", "--lab", str(lab), "data.cleaning=[{rule: lowercase}]"],
        capture_output=True,
    )
    assert data.returncode == 0, data.stderr
    results = [json.loads(p.communicate(timeout=600)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs), results
    assert {r["data_version"] for r in results} <= {version, Store(lab).current_data()}
    for result in results:  # the record says which version it trained on, and it is whole
        record = Store(lab).read_record(result["id"])
        assert record["data_version"] == result["data_version"]
    found = fsck(lab)
    assert found["passed"], found["problems"]
