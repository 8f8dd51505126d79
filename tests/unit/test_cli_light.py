"""The CLI is light: importing it loads neither torch nor transformers, and every refusal that
needs no model (a spec's, a record's, a base that is not there or only pickles) comes back
before they load, in well under a second."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from light_commands import LIGHT_COMMANDS


def test_importing_the_cli_loads_neither_torch_nor_transformers():
    code = (
        "import sys, tunelab.cli; "
        "print(sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_help_records_and_refused_specs_load_neither_torch_nor_transformers(tmp_path, tiny_bert):
    """`--help`, `runs`, `compare`, `invalidate` and the spec checks refuse (or answer) without
    importing torch: a refusal does not wait for a model's libraries to load. `data` builds its
    version without it too (torch alone would be a fifth of a GiB of its memory)."""
    spec = {"data": {"sources": [{"type": "jsonl", "path": "d.jsonl"}]}, "model": {}}
    spec["model"] |= {"path": str(tiny_bert), "max_length": 64}  # its positions: 128
    bare, planned = tmp_path / "bare", tmp_path / "planned"
    for lab, extra in ((bare, {}), (planned, PLAN)):
        lab.mkdir()
        (lab / "tunelab.yaml").write_text(json.dumps({**spec, **extra}))
    rows = [{"text": f"document {i} about {'ab'[i % 2]}", "label": "ab"[i % 2]} for i in range(40)]
    for lab in (bare, planned):
        (lab / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pickled = planned / "pickled"  # a base saved as pytorch_model.bin only
    pickled.mkdir()
    shutil.copy(tiny_bert / "config.json", pickled / "config.json")
    (pickled / "pytorch_model.bin").write_bytes(b"not loaded")
    b, p = ["--lab", str(bare)], ["--lab", str(planned)]
    commands = [
        (["--help"], 0),
        (["runs", *b], 0),
        (["compare", "--help"], 0),
        (["compare", *b], 2),  # no data version yet
        (["invalidate", "r001", "--why", "x", *b], 2),  # no such run
        (["data", *b], 0),
        (["run", *b], 2),  # no hypothesis, no guardrails
        (["run", *b, "training.lr=abc"], 2),  # an override that is not a number
        (["run", *p, "method.target_modules=[q_proj]"], 2),  # BERT has query/key/value
        (["size", *p, "method.target_modules=[q_proj]"], 2),
        (["data", *p], 0),  # a lab `run` would train: ablate's refusals are light there too
        (["ablate", "foo", *p], 2),  # no KEY=V1,V2,...
        (["ablate", "training.lr=1e-3,-1", *p], 2),  # a bad last value
        (["ablate", "training.lr=1e-3,-1", "--check", *p], 2),  # with each wiring checked
        (["run", *p, "--device", "potato"], 2),  # no device name: refused before torch loads
        (["baseline", *p, "model.path=pickled"], 2),  # pickles: refused before torch, too
    ]
    argv = json.dumps([c for c, _ in commands])
    wide = {**os.environ, "COLUMNS": "1000"}  # one error, one line
    run = subprocess.run(
        [sys.executable, "-c", LIGHT_COMMANDS, argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=wide,
    )
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout.strip().splitlines()[-1])
    assert [(r["argv"], r["code"]) for r in results] == commands, run.stderr
    assert [r["heavy"] for r in results] == [[]] * len(commands)
    assert "'q_proj' matches no module of" in run.stderr and "refuses to start" in run.stderr
    assert "training.lr=abc (command line)" in run.stderr
    assert "holds its weights only as pytorch_model.bin" in run.stderr


FIXTURE_LAB = Path(__file__).resolve().parents[1] / "fixtures" / "lab-format2"


def test_what_a_recorded_run_is_refuses_it_before_torch_and_before_its_base(tmp_path):
    """`resume` of a completed run, `export` of a baseline and a second `final` without a
    reason are said from the records alone: they took 3 to 7 s when they came after the stage's
    imports, and `export` of a baseline whose base had moved was told to put the base back.
    (The fixture lab's base is a temporary folder long gone.) They work from the run's record,
    so a typo in today's tunelab.yaml, meant for the next experiment, does not stop them."""
    lab = shutil.copytree(FIXTURE_LAB, tmp_path / "lab")
    spec = lab / "tunelab.yaml"
    spec.write_text(spec.read_text().replace("batch_size: 16", "batch_size: lots"))
    at = ["--lab", str(lab)]
    commands = [
        (["resume", "r003", *at], 2),
        (["export", "r001", *at], 2),
        (["final", "r001", *at], 2),
    ]
    run = subprocess.run(
        [sys.executable, "-c", LIGHT_COMMANDS, json.dumps([c for c, _ in commands])],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "1000"},
    )
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout.strip().splitlines()[-1])
    assert [(r["argv"], r["code"]) for r in results] == commands, run.stderr
    assert [r["heavy"] for r in results] == [[]] * len(commands)
    said = run.stderr.splitlines()
    assert said[0].endswith(
        "r003-lora is completed: only an interrupted, lost or failed run can be resumed"
    )
    assert (
        "r001-majority is a completed baseline: only a completed, trained variant has weights "
        "to hand over. A baseline is the base model as it is, with nothing trained to hand over: "
        "train a variant from it (`tunelab run`) and export that."
    ) in said[1]
    assert said[2].startswith("error (final): the test split was already opened")


PLAN = {
    "hypothesis": {"behaviour": "b", "metric": "accuracy", "min_effect": 0.0},
    "guardrails": [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}],
}


def test_size_strategy_without_nproc_is_refused_not_ignored(make_lab, capsys):
    """`size --strategy fsdp` measured one process and said nothing of the strategy."""
    from tunelab.cli import main

    code = main(["size", "--lab", str(make_lab()), "--strategy", "fsdp", "--json"])
    said = json.loads(capsys.readouterr().out)
    assert code == 2 and said["error"].startswith("--strategy fsdp says how several processes")
    assert "add --nproc N" in said["error"]
