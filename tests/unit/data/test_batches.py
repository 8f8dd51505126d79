"""A long map over texts says how far it has come, inside `batches.reporting`."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np

from tunelab.data import batches


def _lengths(texts: list[str]) -> np.ndarray:
    return np.array([[len(t)] for t in texts], dtype=np.int64)


def test_a_long_map_says_how_far_it_has_come_and_only_where_asked(monkeypatch):
    """A million rows' near duplicates took minutes under one line, `finding duplicates`."""
    monkeypatch.setattr(batches, "REPORT_EVERY_S", 0.0)
    texts = ["ab"] * 5000
    said: list[str] = []
    with batches.reporting(said.append):
        out = batches.map_batches(_lengths, texts, (), 1, np.int64, workers=1)
    assert out[:, 0].tolist() == [2] * 5000
    assert said == ["2,048 of 5,000 texts", "4,096 of 5,000 texts", "5,000 of 5,000 texts"]
    said.clear()
    batches.map_batches(_lengths, texts, (), 1, np.int64, workers=1)  # outside: nothing said
    assert said == []


def test_the_workers_leave_ctrl_c_to_the_data_step():
    """A Ctrl-C reaches the whole process group: a worker it reached while importing tunelab
    printed its traceback under the data step's one line (5 of 7 tries at 60k rows)."""
    import subprocess
    import sys

    code = (
        "import multiprocessing, signal\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from tunelab.data import batches\n"
        "batches._forkserver_deaf_to_ctrl_c()\n"
        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back\n"
        "with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('forkserver')) as p:\n"
        "    print(p.submit(signal.getsignal, signal.SIGINT).result() == signal.SIG_IGN)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_a_worker_ends_once_the_command_it_works_for_is_gone():
    """A `data` killed with -9 left its workers blocked for ever, holding its stdout open."""
    owner = subprocess.Popen(["sleep", "60"])
    watch = f"from tunelab.data.batches import _outlive_not; _outlive_not({owner.pid})"
    worker = subprocess.Popen([sys.executable, "-c", f"{watch}; import time; time.sleep(60)"])
    try:
        time.sleep(1.0)  # started, and watching
        assert worker.poll() is None
        owner.kill()  # not collected yet: a zombie, which a signal of 0 still finds
        assert worker.wait(timeout=10) == 1
        owner.wait()
    finally:
        for p in (owner, worker):
            p.kill()
