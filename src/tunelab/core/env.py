"""Environment fingerprint: what ran a stage, so runs from different platforms are not mixed."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import tunelab
from tunelab.core.errors import TunelabError

if TYPE_CHECKING:
    import torch

DEVICE_VARIABLE = "TUNELAB_DEVICE"

PLATFORM_PACKAGES = ("torch", "transformers", "peft")
"""The packages whose versions make a platform: a run or check on other versions is redone."""
PACKAGES = (*PLATFORM_PACKAGES, "safetensors", "tokenizers", "scikit-learn")
"""The packages an environment record lists."""


def _version(name: str) -> str | None:
    from importlib import metadata  # 30 ms: only when versions are asked for

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    """The tunelab checkout's commit, when it runs from one."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(tunelab.__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def device_of(device: torch.device) -> dict:
    import torch

    if device.type == "cuda":
        return {
            "type": "rocm" if torch.version.hip else "cuda",
            "name": torch.cuda.get_device_name(device),
            "count": torch.cuda.device_count(),
        }
    return {"type": device.type, "name": cpu_name(), "count": 1}


def cpu_name() -> str:
    """The CPU's model (`AMD EPYC 7R13 Processor`), where the system says it; else its
    architecture (`x86_64`: Linux's `platform.processor()` is empty, so it had named every CPU
    alike)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith(("model name", "Model")) and ":" in line:
                    return line.split(":", 1)[1].strip() or platform.machine()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def pick_device(requested: str | None = None) -> torch.device:
    """The device a stage runs on, chosen here once and then passed explicitly: `requested`
    (the CLI's `--device`), else the `TUNELAB_DEVICE` variable, else CUDA (or ROCm) when
    present, else the CPU. A device that is asked for but not here is refused (a name that is
    not cpu, cuda or cuda:N before torch is imported, so at once)."""
    name = requested or os.environ.get(DEVICE_VARIABLE) or None
    where = "--device" if requested else DEVICE_VARIABLE
    if name is not None and not re.fullmatch(r"cpu|cuda(:\d+)?", name):
        raise TunelabError(
            f"{where} {name!r} is not a device name tunelab runs on; use cpu, cuda or cuda:N"
        )
    import torch

    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (device.index is not None and device.index >= count) or count == 0:
            raise TunelabError(
                f"{where} {name!r}: this machine has {count} CUDA device(s); use cpu"
                + (f" or cuda:0..cuda:{count - 1}" if count else "")
            )
        if device.index is not None:  # torch's current device too: what a tensor made
            torch.cuda.set_device(device)  # without one (a pinned batch) had opened on GPU 0
    return device


def fingerprint(device: torch.device) -> dict:
    import torch

    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {name: _version(name) for name in PACKAGES},
        "torch_cuda": torch.version.cuda,
        "torch_hip": torch.version.hip,
        "cuda_driver": _driver(),
        "device": device_of(device),
        "threads": torch.get_num_threads(),
        "tunelab": tunelab.__version__,
        "git_commit": _git_commit(),
    }


def _driver() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


REPRODUCIBLE_BLAS = {"MKL_CBWR": "AUTO,STRICT"}
"""Intel MKL's strict conditional numerical reproducibility, for every tunelab process (the CLI
sets it before torch runs a kernel; a fresh process inherits it). Without it MKL's AVX2 code
path, the one an AVX2-only CPU takes, gave a reloaded model outputs that differed from the
trained one in the last bits (log-probabilities 1e-5 apart, on SmolLM2-135M in a fresh process),
so `tunelab check` failed its exact reload on a CPU; with it the reload is identical, and the
AVX-512 path's results and a step's speed are unchanged (bench/README.md). A value the user
set is kept."""


def reproducible_blas() -> None:
    """Set `REPRODUCIBLE_BLAS` unless the user set those variables: only effective before the
    BLAS library first runs, so the CLI calls it before any command's work."""
    for name, value in REPRODUCIBLE_BLAS.items():
        os.environ.setdefault(name, value)


def dies_with_parent() -> None:
    """A child process's first act (`preexec_fn`): on Linux, ask to be killed when its parent
    dies, so a `verify` or a reload check killed with -9 leaves no orphan holding its memory
    (and a GPU's). Elsewhere nothing."""
    if sys.platform != "linux":
        return
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs: not gone, not another user's (its number taken again), and
    not a zombie, dead and waiting for its parent to collect it (`os.kill(pid, 0)` says yes to
    one, and a caller that reads a killed `data`'s output to its end before collecting it had
    waited on the workers for ever)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:  # no /proc (not Linux): the signal's answer stands
        return True
    state = stat[stat.rindex(b")") + 2 :][:1]  # the field after the command's name
    return state != b"Z"


def run_child(command: list[str], **options) -> subprocess.CompletedProcess:
    """`subprocess.run` of a fresh tunelab process that dies with this one (`dies_with_parent`)."""
    return subprocess.run(command, preexec_fn=dies_with_parent, **options)


def child_env() -> dict:
    """The environment for a fresh tunelab process (a reload check, a bundle's verify):
    the parent's, offline, with this tunelab importable even from a checkout."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    src = str(Path(tunelab.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    return env


_COMMAND_STARTED: list[str] = []
"""When this process started, set by the CLI where the process is the command (so a run's
record can count the imports, the model's load and a probe's fit before it opened)."""


def mark_command_start() -> None:
    """Remember when this process started (Linux: `/proc/self/stat`'s start time after boot);
    nothing where that cannot be read."""
    from datetime import datetime, timezone

    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 of stat(5), counted after the command's name
        boot = next(
            int(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        started = boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return
    _COMMAND_STARTED[:] = [datetime.fromtimestamp(started, timezone.utc).isoformat()]


def command_started() -> str | None:
    """When this command's process started (ISO time), where the CLI marked it; else None (a
    library caller, such as a demo, that runs many stages in one process)."""
    return _COMMAND_STARTED[0] if _COMMAND_STARTED else None


class ProgressToAClosedPipe:
    """stderr, whose reader may stop reading (`tunelab data 2>&1 | head`): the first broken
    pipe points the stream's descriptor at /dev/null and the command goes on, its work
    recorded. A progress line had raised BrokenPipeError inside the stage, which ended as an
    internal error (exit 1) with no data version written. The result on stdout says the rest
    (`cli`: exit 141 where stdout is the closed pipe too)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def _gone(self) -> None:
        os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
