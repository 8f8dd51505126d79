"""Faults survived: SIGKILL at random moments of `data`, `run`, `final` and `export`, a full disk,
and Ctrl-C while the test split or the bundle is half done.

After every kill the whole store is read back (`assert_whole`): every record and event line
parses; every data version accounts for its rows and its files hash as its manifest says; every
completed run's predictions and weights, every checkpoint, every bundle and every test-split
result is whole. A killed run resumed from its checkpoint ends with the metrics of a run never
killed.

Each command runs in a child of a fork server that imported torch, transformers and tunelab once
(multiprocessing's `forkserver` with preloaded modules), so a command starts in milliseconds
instead of the seconds a fresh interpreter takes; the child calls `tunelab.cli.main` itself.
The kill moments are seeded, drawn over each command's own measured duration.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import resource
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from tunelab.cli import main
from tunelab.core import ledger
from tunelab.core.chain import verify
from tunelab.core.seal import final_accesses
from tunelab.core.store import RUN_STATES, Store, read_jsonl
from tunelab.modeling.checkpoint_files import CHECKPOINT_DIR, find_checkpoint
from tunelab.stages.export.verify import check_files

pytestmark = pytest.mark.slow

KILLS = 20
"""SIGKILLs that must land (the child still running) per command."""
PRELOAD = [
    "tunelab.cli",
    "torch",
    "transformers",
    "peft",
    "safetensors.torch",
    "tunelab.data",
    "tunelab.stages.run.variant",
    "tunelab.stages.final.sealed",
    "tunelab.stages.export.bundle",
    "test_faults",
]
TRAINING = {
    "lr": 5e-3,
    "global_batch": 8,
    "microbatch": 4,
    "budget": {"steps": 8},
    "seed": 0,
    "checkpoint_every": 1,
}
_server = None


def server():
    """The fork server's context, started once with everything heavy already imported."""
    global _server
    if _server is None:
        _server = multiprocessing.get_context("forkserver")
        _server.set_forkserver_preload(PRELOAD)
        warm = _server.Process(target=int)  # waits for the preloading: not part of a duration
        warm.start()
        warm.join()
    return _server


def _child(argv: list[str], out: str, fsize: int | None) -> None:
    """Run `tunelab ARGV` as its own process would: stdout to `out`, stderr to `out.err`, one
    torch thread, and a file-size limit when given."""
    for fd, path in ((1, out), (2, out + ".err")):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    torch.set_num_threads(1)  # a shared, busy machine: more threads only contend
    if fsize is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    sys.exit(main(argv))


@dataclass
class Child:
    process: multiprocessing.Process
    out: Path
    started: float

    def finish(self, timeout: float = 300) -> int:
        self.process.join(timeout)
        assert self.process.exitcode is not None, f"still running after {timeout}s"
        return self.process.exitcode

    def kill(self) -> bool:
        """SIGKILL now; True when the child was still running (the kill landed)."""
        self.process.kill()
        return self.finish() == -signal.SIGKILL


def launch(lab: Path, *argv: str, fsize: int | None = None) -> Child:
    out = lab.parent / f"child-{time.monotonic_ns()}.out"
    argv = [argv[0], "--lab", str(lab), *argv[1:], "--json"]
    process = server().Process(target=_child, args=(argv, str(out), fsize))
    process.start()
    return Child(process, out, time.monotonic())


def tunelab(lab: Path, *argv: str, fsize: int | None = None) -> tuple[int, dict, float]:
    """Run one command to its end in a child: exit code, its JSON output, seconds."""
    child = launch(lab, *argv, fsize=fsize)
    code = child.finish()
    seconds = time.monotonic() - child.started
    text = child.out.read_text()
    try:
        return code, json.loads(text), seconds
    except json.JSONDecodeError:
        err = Path(str(child.out) + ".err").read_text(errors="replace")
        raise AssertionError(f"exit {code}, no JSON: {text[-2000:]}{err[-3000:]}") from None


def kill_at_random_moments(lab: Path, rng: random.Random, duration: float, argv_of) -> int:
    """Start `argv_of(i)` and SIGKILL it after a random moment of its `duration`, until KILLS
    kills have landed; check the whole store after each. Returns the attempts.

    `duration` is one run's, measured once on a shared machine: when a command ends before
    its kill, it ran faster than that (the machine was busier then), so the moments are drawn
    from a quarter less of it after each miss."""
    landed = attempts = 0
    window = 0.9 * duration
    while landed < KILLS:
        assert attempts < 2 * KILLS, f"only {landed} of {attempts} kills landed"
        child = launch(lab, *argv_of(attempts))
        time.sleep(rng.uniform(0.0, window))
        hit = child.kill()
        landed += hit
        window *= 1 if hit else 0.75
        attempts += 1
        assert_whole(lab)
    print(
        f"{argv_of(0)[0]}: {landed} kills landed in {attempts} tries over {duration:.2f}s "
        f"(moments drawn from the first {window:.2f}s at the end)"
    )
    return attempts


# --- what "whole" means -------------------------------------------------------------------------


def visible(root: Path, pattern: str) -> list[Path]:
    """Files under `root` that a reader may take: not a hidden temporary left by a kill."""
    return [
        p
        for p in root.rglob(pattern)
        if not any(part.startswith(".") for part in p.relative_to(root).parts)
    ]


def assert_whole(lab: Path) -> None:
    store = Store(lab)
    root = store.root
    for path in visible(root, "*.json"):
        json.loads(path.read_text(encoding="utf-8"))  # records, manifests, heartbeats, states
    for path in visible(root, "*.jsonl"):
        if path.name != "events.jsonl":
            read_jsonl(path)
    store.events(strict=True)  # every event line parses
    _data_whole(store)
    for record in store.runs():
        _run_whole(store, record)
    final_accesses(store)  # every test-split result has its logged opening
    for path in visible(root / "finals", "*.json") if (root / "finals").exists() else []:
        assert "metrics" in json.loads(path.read_text())
    for path in visible(root / "exports", "*.json") if (root / "exports").exists() else []:
        bundle = Path(json.loads(path.read_text())["bundle"])
        assert check_files(bundle)["passed"], (path, check_files(bundle))
    bundles = lab / "bundles"
    for bundle in (
        [b for b in bundles.iterdir() if not b.name.startswith(".")] if bundles.exists() else []
    ):
        assert check_files(bundle)["passed"], f"{bundle} looks whole but is not"


def _data_whole(store: Store) -> None:
    from tunelab.core.digest import sha256_file

    current = store.root / "data" / "CURRENT"
    if current.exists():  # a version whole, and logged before it was made current
        version = current.read_text().strip()
        assert (store.data_dir(version) / "manifest.json").exists()
        assert version in {e.get("version") for e in store.events() if e["event"] == "data"}
    data = store.root / "data"
    for folder in (
        [d for d in data.iterdir() if d.is_dir() and not d.name.startswith(".")]
        if data.exists()
        else []
    ):
        manifest = json.loads((folder / "manifest.json").read_text())  # no folder without one
        rows = manifest["rows"]
        assert rows["rows_read"] == rows["kept"] + rows["quarantined"] + rows["duplicates_removed"]
        kept = sum(len(read_jsonl(folder / f"{s}.jsonl")) for s in ("train", "validation", "test"))
        assert kept == rows["kept"]
        assert len(read_jsonl(folder / "quarantine.jsonl")) == rows["quarantined"]
        for name, digest in manifest["files"].items():
            assert sha256_file(folder / name) == digest, f"{folder / name} is not what was written"


def _run_whole(store: Store, record: dict) -> None:
    run_dir = store.runs_dir / record["id"]
    assert record["status"] in RUN_STATES
    assert ledger.summary(record, run_dir)["status"] in (*RUN_STATES, "lost")
    checkpoint = find_checkpoint(run_dir / CHECKPOINT_DIR)
    if checkpoint is not None:  # the one a resume would take: every file of it whole
        with safe_open(checkpoint / "trainable.safetensors", "pt") as fh:
            assert list(fh.keys())
        torch.load(checkpoint / "optimizer.pt", weights_only=True)
    if record["status"] == "completed":
        version = record["data_version"]
        n = len(read_jsonl(store.data_dir(version) / "validation.jsonl"))
        assert len(read_jsonl(run_dir / "predictions.jsonl")) == n
        weights = run_dir / record["weights"]["dir"]
        assert sorted(p.name for p in weights.iterdir()) == record["weights"]["files"]
        for file in weights.glob("*.safetensors"):
            with safe_open(file, "pt") as fh:
                assert list(fh.keys())


# --- the labs -----------------------------------------------------------------------------------


@pytest.fixture
def fault_lab(make_lab):
    """A tiny classification lab with rows to quarantine and to deduplicate, checkpointing
    every step."""
    from conftest import topic_rows

    rows = topic_rows()
    rows += rows[:3]  # exact duplicates, removed
    rows += [{"text": "no label here"}, {"label": "tech"}]  # quarantined
    return make_lab(rows, training=TRAINING)


@pytest.fixture
def trained(fault_lab):
    """The lab with its data and one completed run, `r001-ref`, and that run's duration."""
    assert tunelab(fault_lab, "data")[0] == 0
    code, record, seconds = tunelab(fault_lab, "run", "--name", "ref")
    assert code == 0 and record["status"] == "completed", record
    return fault_lab, record, seconds


# --- the tests ----------------------------------------------------------------------------------


def test_data_killed_at_random_moments_leaves_whole_versions(fault_lab):
    code, report, seconds = tunelab(fault_lab, "data")
    assert code == 0 and report["quarantined"] == 2 and report["duplicates_removed"] > 0
    rng = random.Random(1)
    # a new split seed makes a new version each time, so every kill can land mid-write
    kill_at_random_moments(fault_lab, rng, seconds, lambda i: ("data", f"data.split.seed={i + 1}"))
    code, again, _ = tunelab(fault_lab, "data")
    assert code == 0 and again["version"] == report["version"]


def test_run_killed_at_random_moments_resumes_to_the_uninterrupted_metrics(trained):
    lab, reference, seconds = trained
    kill_at_random_moments(lab, random.Random(2), seconds, lambda i: ("run", "--name", f"k{i}"))
    store = Store(lab)
    killed = [r for r in store.runs() if r["id"] != reference["id"]]
    assert {ledger.summary(r, store.runs_dir / r["id"])["status"] for r in killed} <= {
        "lost",
        "completed",
    }
    resumable = [
        r
        for r in killed
        if r["status"] == "running" and find_checkpoint(store.runs_dir / r["id"] / CHECKPOINT_DIR)
    ]
    assert len(resumable) >= 2, "no kill landed after a first checkpoint"
    predictions = (store.runs_dir / reference["id"] / "predictions.jsonl").read_text()
    for record in random.Random(3).sample(resumable, 2):
        code, resumed, _ = tunelab(lab, "resume", record["id"])
        assert code == 0 and resumed["status"] == "completed", resumed
        assert resumed["metrics"] == reference["metrics"]
        assert [h["loss"] for h in resumed["training"]["history"]] == pytest.approx(
            [h["loss"] for h in reference["training"]["history"]], abs=1e-6
        )
        assert (store.runs_dir / record["id"] / "predictions.jsonl").read_text() == predictions
    assert_whole(lab)


def test_final_killed_at_random_moments_keeps_the_access_log_whole(trained, capsys, monkeypatch):
    lab, reference, _ = trained
    run = reference["id"]
    code, first, seconds = tunelab(lab, "final", run, "--reason", "fault test")
    assert code == 0 and first["n"] == 1
    kill_at_random_moments(
        lab, random.Random(4), seconds, lambda i: ("final", run, "--reason", f"kill {i}")
    )
    # Ctrl-C while the split is being evaluated: the opening stays logged, and is said to be
    monkeypatch.setattr("tunelab.stages.final.sealed.scorer_of", lambda *args: _interrupt)
    code = main(["final", "--lab", str(lab), run, "--reason", "ctrl-c", "--json"])
    message = json.loads(capsys.readouterr().out.splitlines()[-1])["error"]
    assert code == 130 and "no result was written" in message and "--reason" in message
    assert Store(lab).events()[-1] | {"time": None, "prev": None} == {
        "time": None,
        "prev": None,
        "event": "final_interrupted",
        "n": Store(lab).events()[-2]["n"],
        "run": run,
    }
    monkeypatch.undo()
    code, last, _ = tunelab(lab, "final", run, "--reason", "after the kills")
    assert code == 0 and last["repeated"] and last["metrics"] == first["metrics"]
    assert len(final_accesses(Store(lab))) == last["n"]
    assert last["n"] > 3, "no kill landed after an opening was logged"  # first, ctrl-c, last
    assert_whole(lab)
    assert verify(Store(lab).log_path)["problems"] == []  # the kills left the chain whole


def test_export_killed_at_random_moments_never_leaves_a_bundle_that_looks_whole(
    trained, capsys, monkeypatch
):
    lab, reference, _ = trained
    run = reference["id"]
    code, first, seconds = tunelab(lab, "export", run, "--out", str(lab / "bundles" / "first"))
    assert code == 0, first
    kill_at_random_moments(
        lab,
        random.Random(5),
        seconds,
        lambda i: ("export", run, "--out", str(lab / "bundles" / f"k{i}")),
    )
    monkeypatch.setattr("tunelab.stages.export.bundle.write_sums", _interrupt)
    code = main(["export", "--lab", str(lab), run, "--out", str(lab / "bundles" / "c"), "--json"])
    message = json.loads(capsys.readouterr().out.splitlines()[-1])["error"]
    assert code == 130 and "no bundle was written" in message
    assert not (lab / "bundles" / "c").exists()
    assert [p for p in (lab / "bundles").iterdir() if p.name.startswith(".c.")] == []
    # what the killed exports left is gone too: each export removes the leftovers it finds
    assert [p.name for p in (lab / "bundles").iterdir() if p.name.startswith(".")] == []
    assert_whole(lab)


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt("SIGTERM")


@pytest.mark.parametrize(
    ("command", "limit"),
    [(("data",), 8_000), (("run", "--name", "full", "method.type=full"), 60_000)],
    ids=["data", "run"],
)
def test_a_full_disk_is_a_clear_error_and_corrupts_nothing(make_lab, command, limit):
    from conftest import topic_rows

    lab = make_lab(topic_rows(100), training={**TRAINING, "checkpoint_every": None})
    if command[0] != "data":
        assert tunelab(lab, "data")[0] == 0
    code, err, _ = tunelab(lab, *command, fsize=limit)
    assert code == 2, err
    assert "file-size limit was hit" in err["error"] and "Nothing was corrupted" in err["error"]
    assert_whole(lab)
    store = Store(lab)
    if command[0] == "data":
        assert not (store.root / "data" / "CURRENT").exists()
    else:
        (record,) = store.runs()
        assert record["status"] == "failed" and "File too large" in record["error"]
