"""Validation during training through the CLI: a planted overfitting run (train labels that are
noise, validation labels that are true) measures its validation loss at the spec's cadence,
warns that it overfits, keeps its best step's weights, and the report draws the curve."""

from __future__ import annotations

import json
import random
from pathlib import Path

import yaml
from test_cli import tl

from conftest import lab_spec, topic_rows


def overfitting_lab(tmp_path, tiny_bert) -> str:
    rows = topic_rows(20)
    labels = sorted({r["label"] for r in rows})
    rng = random.Random(1)
    out = []
    for i, row in enumerate(rows):
        split = "train" if i < 36 else "validation" if i < 48 else "test"
        noise = rng.choice(labels) if split == "train" else row["label"]  # memorised, not learned
        out.append({"text": row["text"], "label": noise, "split": split})
    lab = tmp_path / "overfit"
    lab.mkdir()
    (lab / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out))
    spec = lab_spec(tiny_bert)
    spec["data"] = {
        "sources": [{"type": "jsonl", "path": "docs.jsonl"}],
        "fields": {"split": "split"},
    }
    spec["method"] = {"type": "full"}
    spec["training"] = {
        "lr": 3e-3,
        "global_batch": 8,
        "microbatch": 8,
        "budget": {"steps": 40},
        "seed": 0,
        "validate_every": 4,
        "keep": "best",
    }
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(spec))
    return str(lab)


def test_a_planted_overfit_is_warned_about_and_its_best_step_kept(
    tmp_path, tiny_bert, capsys, monkeypatch
):
    lab = overfitting_lab(tmp_path, tiny_bert)
    assert tl(capsys, "data", "--lab", lab)[0] == 0
    assert tl(capsys, "baseline", "--lab", lab)[0] == 0
    code, run = tl(capsys, "run", "--lab", lab, "--name", "full")
    assert code == 0, run
    training = run["training"]
    v = training["validation"]
    assert [p["step"] for p in v["points"]] == list(range(4, 41, 4))
    measured = [h for h in training["history"] if "validation_loss" in h]
    assert [h["step"] for h in measured] == list(range(4, 41, 4))
    assert v["overfitting"] is not None, v["points"]
    assert "validation loss rose at 3 measurements in a row" in v["overfitting"]["message"]
    kept = training["kept"]
    assert kept["rule"] == "best validation loss" and kept["step"] == v["best"]["step"] < 40
    assert kept["validation_loss"] == min(round(p["loss"], 6) for p in v["points"])

    # stopped after its best step and resumed, it keeps that step's weights as the
    # uninterrupted run did (it kept its last step's: the checkpoint held no best weights)
    from tunelab.core.store import Store
    from tunelab.training import loop

    real = loop.save_checkpoint

    def then_stop(*args, **kwargs):
        real(*args, **kwargs)
        if args[4]["step"] == 32:  # the loop's state: a checkpoint past the best step
            raise KeyboardInterrupt

    monkeypatch.setattr(loop, "save_checkpoint", then_stop)
    again = ["--name", "stopped", "training.checkpoint_every=8"]
    assert tl(capsys, "run", "--lab", lab, *again)[0] == 130
    monkeypatch.setattr(loop, "save_checkpoint", real)
    (stopped,) = [r for r in Store(Path(lab)).runs() if r["name"] == "stopped"]
    assert stopped["status"] == "interrupted" and kept["step"] < 32
    code, resumed = tl(capsys, "resume", "--lab", lab, stopped["id"])
    assert code == 0, resumed
    assert resumed["training"]["kept"] == kept  # the best step, not the last
    assert resumed["metrics"] == run["metrics"]

    code, judged = tl(capsys, "compare", "--lab", lab)  # said beside the verdict too
    (row,) = [r for r in judged["runs"] if r["id"] == run["id"]]
    assert f"{run['id']}: {v['overfitting']['message']}" in row["warnings"]
    assert any(
        w.startswith(f"{run['id']} kept step {kept['step']}'s weights of its 40")
        for w in row["warnings"]
    )

    code, report = tl(capsys, "report", "--lab", lab)
    page = (
        Path(report["file"]) if Path(report["file"]).is_absolute() else Path(lab) / report["file"]
    )
    assert code == 0 and "validation loss dashed" in page.read_text()
