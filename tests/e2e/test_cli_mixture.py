"""A data mixture with a curriculum stage, through the CLI: the record says what was drawn."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import yaml

from conftest import tl, topic_rows
from tunelab.core.store import Store


def _two_source_lab(make_lab, mixture) -> str:
    lab = make_lab(
        data={
            "sources": [
                {"type": "jsonl", "path": "docs.jsonl"},
                {"type": "jsonl", "path": "more.jsonl", "name": "extra"},
            ],
            "split": {"train": 0.6, "validation": 0.2, "test": 0.2, "seed": 0},
            "mixture": mixture,
        },
        training={"lr": 5e-3, "global_batch": 8, "microbatch": 4, "budget": {"steps": 6}},
    )
    rows = [{**r, "text": "more " + r["text"]} for r in topic_rows(10, seed=1)]
    (lab / "more.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(lab)


def test_a_run_follows_the_mixture_and_its_stages(make_lab, capsys):
    lab = _two_source_lab(
        make_lab,
        {"weights": {"docs": 1, "extra": 3}, "stages": [{"from_step": 4, "weights": {"docs": 1}}]},
    )
    code, data = tl(capsys, "data", "--lab", lab)
    assert code == 0
    train_rows = Store(lab).read_split(data["version"], "train")
    assert {r["source"] for r in train_rows} == {"docs", "extra"}

    code, run = tl(capsys, "run", "--lab", lab, "--name", "mix")
    assert code == 0, run
    mix = run["training"]["mixture"]
    assert mix["sources"] == {
        "docs": sum(r["source"] == "docs" for r in train_rows),
        "extra": sum(r["source"] == "extra" for r in train_rows),
    }
    first, second = mix["stages"]
    assert first["steps"] == [0, 4] and second["steps"] == [4, 6]
    assert first["weights"] == {"docs": 0.25, "extra": 0.75}
    assert sum(c["rows"] for c in first["sampled"].values()) == 4 * 8
    assert list(second["sampled"]) == ["docs"] and second["sampled"]["docs"]["rows"] == 2 * 8
    saved = json.loads((Store(lab).run_dir(run["id"]) / "record.json").read_text())
    assert saved["training"]["mixture"] == mix


def test_a_mixture_naming_an_unknown_source_points_at_the_spec(make_lab, capsys):
    lab = _two_source_lab(make_lab, {"weights": {"docs": 1, "blog": 1}})
    code, err = tl(capsys, "data", "--lab", lab)
    assert code == 2
    assert "data.mixture.weights: unknown source(s) ['blog']" in err["error"]
    assert "tunelab.yaml" in err["error"]


def test_a_source_left_out_of_the_weights_is_refused_before_a_run_exists(make_lab, capsys):
    lab = _two_source_lab(make_lab, {"weights": {"docs": 1, "extra": 1}})
    assert tl(capsys, "data", "--lab", lab)[0] == 0
    spec_file = Path(lab) / "tunelab.yaml"
    spec = yaml.safe_load(spec_file.read_text())
    spec["data"]["mixture"] = {"weights": {"docs": 1}}
    spec_file.write_text(yaml.safe_dump(spec))
    code, err = tl(capsys, "run", "--lab", lab)
    assert code == 2 and "['extra'] have training rows but no weight" in err["error"]
    assert Store(lab).runs() == []


def test_an_interrupted_mixture_run_resumes_to_the_same_draws_and_metrics(make_lab, capsys):
    lab = _two_source_lab(
        make_lab,
        {"weights": {"docs": 1, "extra": 1}, "stages": [{"from_step": 6, "weights": {"docs": 1}}]},
    )
    spec_file = Path(lab) / "tunelab.yaml"
    spec = yaml.safe_load(spec_file.read_text())
    spec["training"] |= {"budget": {"steps": 12}, "checkpoint_every": 1}
    spec_file.write_text(yaml.safe_dump(spec))
    assert tl(capsys, "data", "--lab", lab)[0] == 0
    history = Path(lab) / ".tunelab" / "runs" / "r001-stopped" / "history.jsonl"

    def stop_at_step_4():  # SIGTERM from outside the loop, as a user's `kill` would
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if history.exists() and history.read_text().count("}\n") >= 4:
                record = json.loads((history.parent / "record.json").read_text())
                if record["status"] == "running":  # never to the test process after the run
                    os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.005)

    killer = threading.Thread(target=stop_at_step_4, daemon=True)
    killer.start()
    code, _ = tl(capsys, "run", "--lab", lab, "--name", "stopped")
    killer.join(timeout=5)
    assert code == 130
    assert Store(lab).read_record("r001-stopped")["status"] == "interrupted"

    code, resumed = tl(capsys, "resume", "--lab", lab, "r001-stopped")
    assert code == 0, resumed
    code, straight = tl(capsys, "run", "--lab", lab, "--name", "straight")
    assert code == 0
    assert resumed["training"]["mixture"] == straight["training"]["mixture"]
    assert resumed["metrics"] == straight["metrics"]


def test_copies_across_sources_are_counted_by_source(make_lab, capsys):
    """40 documents in both sources were removed from the later one with no word that they
    were cross-source pairs, nor which source lost them."""
    from rich.console import Console

    from tunelab.views.data import data as data_view

    lab = _two_source_lab(make_lab, {"weights": {"docs": 1, "extra": 1}})
    docs = (Path(lab) / "docs.jsonl").read_text().splitlines()
    copied = [{**json.loads(line), "id": f"copy{i}"} for i, line in enumerate(docs[:3])]
    with (Path(lab) / "more.jsonl").open("a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in copied))
    code, data = tl(capsys, "data", "--lab", lab)
    assert code == 0, data
    assert data["duplicates"]["across_sources"] == {"docs <-> extra": 3}
    console = Console(record=True, width=200)
    data_view(data, console)
    assert "pairs across sources: docs <-> extra 3" in console.export_text()
