"""`core.env`: what a fresh tunelab process is started with."""

from __future__ import annotations


def test_a_child_dies_with_its_parent():
    """`verify` killed with -9 left its fresh process running on, orphaned, holding memory."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import pytest

    if sys.platform != "linux":
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys; from tunelab.core.env import dies_with_parent; "
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
            "preexec_fn=dies_with_parent); print(child.pid, flush=True); child.wait()",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    child = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
        try:  # reaped by init once it died: a zombie would still answer kill 0
            with open(f"/proc/{child}/status") as status:
                if "State:\tZ" in status.read():
                    return
        except FileNotFoundError:
            return
    os.kill(child, signal.SIGKILL)
    raise AssertionError("the child outlived its parent by 10 s")
