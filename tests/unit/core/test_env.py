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


def test_a_gpu_asked_for_by_index_is_made_torch_s_current_device(monkeypatch):
    """`--device cuda:1` trained on GPU 1, while a tensor made without a device (a pinned
    batch) opened a CUDA context on GPU 0; `tunelab size` measured GPU 0."""
    import torch

    from tunelab.core.env import pick_device

    current = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", current.append)
    assert pick_device("cuda:1") == torch.device("cuda", 1) and current == [torch.device("cuda", 1)]
    assert pick_device("cuda") == torch.device("cuda") and len(current) == 1  # torch's own choice
