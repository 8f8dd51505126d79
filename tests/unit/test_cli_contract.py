"""The CLI's contract: user errors exit 2 in one line, bugs exit 1 with the traceback on
request, the device chosen in one place (its lightness: test_cli_light.py)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest

from tunelab.cli import COMMANDS, build_parser, main
from tunelab.core.env import pick_device
from tunelab.core.errors import TunelabError
from tunelab.core.store import Store


def test_each_command_declares_its_own_arguments():
    parser = build_parser()
    size = parser.parse_args(["size", "--seq-len", "64", "training.lr=1e-4"])
    assert (size.seq_len, size.overrides, size.device) == (64, ["training.lr=1e-4"], None)
    with pytest.raises(SystemExit):
        parser.parse_args(["runs", "--seq-len", "64"])  # not an argument of `runs`
    assert {n for n, c in COMMANDS.items() if c.device} >= {"run", "check", "size", "final"}


def _broken_runs(self):
    raise KeyError("a bug, not the user's input")


def test_an_internal_error_is_one_line_without_debug_and_a_traceback_with_it(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / ".tunelab").mkdir()  # a lab (a folder that is none is the user's error)
    monkeypatch.setattr(Store, "runs", _broken_runs)
    monkeypatch.delenv("TUNELAB_DEBUG", raising=False)
    assert main(["runs", "--lab", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "internal error: KeyError" in err and "--debug" in err and "Traceback" not in err
    assert main(["runs", "--lab", str(tmp_path), "--debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "_broken_runs" in err
    monkeypatch.setenv("TUNELAB_DEBUG", "1")
    assert main(["runs", "--lab", str(tmp_path), "--json"]) == 1
    out = capsys.readouterr()
    assert json.loads(out.out)["internal"] is True and "Traceback" in out.err


def test_an_internal_error_says_what_remains_of_the_run_it_broke(tmp_path, monkeypatch, capsys):
    def lost_peer(self):
        err = RuntimeError("Connection closed by peer")
        err.add_note("run r009 failed; its checkpoint (checkpoint) remains: `tunelab resume r009`")
        raise err

    (tmp_path / ".tunelab").mkdir()
    monkeypatch.setattr(Store, "runs", lost_peer)
    assert main(["runs", "--lab", str(tmp_path), "--json"]) == 1
    said = json.loads(capsys.readouterr().out)["error"]
    assert said.startswith("internal error: RuntimeError: Connection closed by peer (rerun")
    assert said.endswith(
        "; run r009 failed; its checkpoint (checkpoint) remains: `tunelab resume r009`"
    )
    # under torchrun, gloo's words for a rank that died are said as that (it read as a bug)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr("tunelab.cli._one_process_unless", lambda *a: None)
    assert main(["runs", "--lab", str(tmp_path), "--json"]) == 1
    said = json.loads(capsys.readouterr().out)["error"]
    assert said.startswith("another process of this run stopped (connection closed by peer")
    assert "torchrun's report names the rank that stopped first" in said and "--debug" not in said
    assert said.endswith("`tunelab resume r009`")


def test_a_plain_value_error_from_a_bug_is_not_read_as_a_usage_error(tmp_path, monkeypatch, capsys):
    def broken(self):
        raise ValueError("int('x') somewhere deep")

    (tmp_path / ".tunelab").mkdir()
    monkeypatch.setattr(Store, "runs", broken)
    assert main(["runs", "--lab", str(tmp_path), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["internal"] is True


def test_a_file_this_user_may_not_write_is_the_user_s_to_fix(tmp_path, monkeypatch, capsys):
    """A read-only lab ended in 'internal error: PermissionError', exit 1, fsck included."""
    events = str(tmp_path / ".tunelab" / "events.jsonl")

    def denied(self):
        raise PermissionError(13, "Permission denied", events)

    (tmp_path / ".tunelab").mkdir()
    monkeypatch.setattr(Store, "runs", denied)
    assert main(["runs", "--lab", str(tmp_path), "--json"]) == 2
    said = json.loads(capsys.readouterr().out)["error"]
    assert said.startswith(f"{events}: Permission denied. This user may not read or write it")


def test_an_interrupted_command_does_not_claim_it_left_nothing(tmp_path, monkeypatch, capsys):
    """'stopped before it finished, and left no run to resume' was printed by commands that
    train no run, and by a run stopped after its record was written complete."""

    def stopped(self):
        raise KeyboardInterrupt("SIGINT")

    (tmp_path / ".tunelab").mkdir()
    monkeypatch.setattr(Store, "runs", stopped)
    assert main(["runs", "--lab", str(tmp_path), "--json"]) == 130
    said = json.loads(capsys.readouterr().out)["error"]
    assert "Whatever it had finished is recorded whole" in said and "no run" not in said


@pytest.mark.parametrize(
    ("code", "why"), [(errno.EACCES, "Permission denied"), (errno.EROFS, "Read-only file system")]
)
def test_a_reader_locks_a_log_it_may_only_read(tmp_path, monkeypatch, code, why):
    """fsck of a read-only lab failed on its shared lock, which opened the log for writing;
    on a read-only file system (an archived lab, a read-only mount) `runs`, `fsck`, `report
    --out` and `verify` still did, refused with EROFS."""
    from tunelab.core.files import locked

    log = tmp_path / "events.jsonl"
    log.write_text("")
    real_open = os.open

    def read_only(path, flags, *mode):
        if flags & os.O_RDWR:
            raise OSError(code, why, str(path))
        return real_open(path, flags, *mode)

    monkeypatch.setattr(os, "open", read_only)
    with locked(log, shared=True):
        pass
    with pytest.raises(OSError, match=why), locked(log):  # a writer is still refused
        pass


def test_the_device_is_asked_for_once_and_refused_when_absent(monkeypatch):
    monkeypatch.delenv("TUNELAB_DEVICE", raising=False)
    assert pick_device("cpu").type == "cpu"
    monkeypatch.setenv("TUNELAB_DEVICE", "cpu")
    assert pick_device().type == "cpu"
    monkeypatch.setenv("TUNELAB_DEVICE", "potato")
    with pytest.raises(TunelabError, match="TUNELAB_DEVICE 'potato' is not a device name"):
        pick_device()
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(TunelabError, match="--device 'cuda:1': this machine has 0 CUDA"):
            pick_device("cuda:1")


def test_a_bad_device_on_the_command_line_exits_2(make_lab, capsys):
    lab = make_lab()
    assert main(["data", "--lab", str(lab), "--json"]) == 0
    capsys.readouterr()
    assert main(["check", "--lab", str(lab), "--device", "potato", "--json"]) == 2
    assert "--device 'potato'" in json.loads(capsys.readouterr().out)["error"]


def test_overrides_may_follow_an_option_after_a_positional(monkeypatch, tmp_path):
    """`tunelab demo ablation --dir X key=value`: argparse alone would refuse the override."""
    import tunelab.demo as demo

    seen = {}

    def fake(task, lab, console, quiet=False, overrides=None):
        seen.update(task=task, lab=lab, overrides=overrides)
        return {}

    monkeypatch.setattr(demo, "run_demo", fake)
    args = ["demo", "ablation", "--dir", str(tmp_path), "training.budget.tokens=4096", "--json"]
    assert main(args) == 0
    assert seen == {
        "task": "ablation",
        "lab": tmp_path,
        "overrides": {"training.budget.tokens": 4096},
    }
    assert main(["demo", "ablation", "--dir", str(tmp_path), "--nope"]) == 2


MKL_MODE = """
import ctypes, os, sys, torch
from tunelab.cli import main
main(["runs", "--lab", sys.argv[1], "--json"])
torch.ones(64, 64) @ torch.ones(64, 64)  # MKL's first kernel, after the command
lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
get = getattr(lib, "mkl_serv_cbwr_get", None)
print("no MKL" if get is None else hex(get(-1)))
"""


@pytest.mark.parametrize("user", [None, "AUTO"])
def test_every_command_runs_mkl_reproducibly_unless_the_user_chose(tmp_path, user):
    """MKL's AVX2 path made a reloaded model differ from the trained one in the last bits (the
    check failed on a CPU); strict conditional reproducibility is set for every command: MKL
    reports branch AUTO (2) with the STRICT flag (0x10000), or what the user set."""
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    env |= {"MKL_CBWR": user} if user else {}
    out = subprocess.run(
        [sys.executable, "-c", MKL_MODE, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[-1]
    if out == "MKL":
        pytest.skip("this torch has no MKL (its BLAS is not MKL's: nothing to set)")
    assert out == ("0x2" if user else "0x10002")


def test_models_run_their_own_code_not_kernels_from_the_hub(tmp_path, monkeypatch, tiny_llama):
    """transformers would swap layers for Hub kernels on CUDA (offline: a failed download);
    after any command a model loads with `use_kernels` off, unless the user asked for them."""
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("USE_HUB_KERNELS", "restored after the test")
    monkeypatch.delenv("USE_HUB_KERNELS")
    assert AutoModelForCausalLM.from_pretrained(tiny_llama).use_kernels  # transformers' default
    main(["runs", "--lab", str(tmp_path), "--json"])
    assert os.environ["USE_HUB_KERNELS"] == "NO"
    assert not AutoModelForCausalLM.from_pretrained(tiny_llama).use_kernels
    monkeypatch.setenv("USE_HUB_KERNELS", "YES")
    main(["runs", "--lab", str(tmp_path), "--json"])
    assert os.environ["USE_HUB_KERNELS"] == "YES"
    from tunelab.core.spec import ModelSpec
    from tunelab.modeling.model import load_causal

    monkeypatch.delenv("USE_HUB_KERNELS")  # tunelab's loaders, outside the CLI, ask for none
    assert not load_causal(
        ModelSpec(path=str(tiny_llama)), tiny_llama, pick_device("cpu")
    ).use_kernels


BARS = """
import sys
from tunelab.cli import main
if sys.argv[2] == "command":
    main(["runs", "--lab", sys.argv[1], "--json"])
from transformers.modeling_gguf_pytorch_utils import tqdm  # the GGUF reader's own bar
for _ in tqdm(range(3), desc="Converting and de-quantizing GGUF tensors..."):
    pass
"""


@pytest.mark.parametrize("before", ["command", "nothing"])
def test_library_progress_bars_stay_out_of_a_commands_output(tmp_path, before):
    """transformers' GGUF reader drew its tqdm bar into the middle of the demo's report; after
    any command tqdm's bars are off (the same process without a command still draws it)."""
    env = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
    run = subprocess.run(
        [sys.executable, "-c", BARS, str(tmp_path), before],
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert ("Converting and de-quantizing" in run.stderr) == (before == "nothing")


def test_a_command_line_argparse_refuses_is_an_error_like_any_other(capsys):
    """Exit 2 either way; with --json the error object on stdout (a script reads nothing on
    stdout otherwise), without it argparse's usage and message on stderr."""
    assert main(["plan", "--days", "5", "--json"]) == 2
    out = capsys.readouterr()
    assert json.loads(out.out) == {
        "error": "argument --days: invalid choice: 5 (choose from 3, 7, 30)",
        "command": "plan",
        "internal": False,
    }
    assert main(["runs", "--bogus"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.startswith("usage: tunelab runs")
    assert out.err.rstrip().endswith("tunelab runs: error: unrecognized arguments: --bogus")
    # a setting where none is taken says so; ablate's, where the others go
    assert main(["ablate", "training.lr=1e-4,1e-3", "method.r=4", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"] == (
        "unrecognized arguments: method.r=4; `tunelab ablate` takes no key=value beside its one "
        "KEY=V1,V2,...: set the others in tunelab.yaml"
    )
    # `run --nproc` (size's option): the processes come from torchrun, said with its line
    assert main(["run", "--nproc", "2", "--json"]) == 2
    said = json.loads(capsys.readouterr().out)["error"]
    assert (
        said.startswith("unrecognized arguments: --nproc") and "`tunelab run` takes several" in said
    )
    assert "`torchrun --nproc_per_node N -m tunelab.cli run ...`" in said
    assert main(["run", "--bogus", "--json"]) == 2  # any other unknown option: named alone
    assert json.loads(capsys.readouterr().out)["error"] == "unrecognized arguments: --bogus"


def test_every_command_s_options_may_come_before_its_name(make_lab, capsys):
    """`tunelab --json runs` answered, in JSON, that it did not know --json."""
    assert main(["--json", "runs", "--lab", str(make_lab())]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_signal_after_the_work_is_done_does_not_cut_the_output(tmp_path):
    """SIGTERM as the result was printed ended `export` with 143 and an empty output file,
    though the bundle was whole."""
    (tmp_path / ".tunelab").mkdir()
    script = (
        "import builtins, os, signal, sys\n"
        "import tunelab.cli as cli\n"
        "real = builtins.print\n"
        "def printed(*a, **k):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)  # as the result is printed\n"
        "    real(*a, **k)\n"
        "builtins.print = printed\n"
        f"sys.argv = ['tunelab', 'runs', '--lab', {str(tmp_path)!r}, '--json']\n"
        "sys.exit(cli.main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize("json_flag", [["--json"], []], ids=["json", "view"])
def test_a_reader_that_stops_reading_ends_the_command_quietly(tmp_path, json_flag):
    """`tunelab track --json | head -c 600` printed a BrokenPipeError traceback, and `tunelab
    runs | head` exited 1 with no word (rich's answer to a closed pipe, not the CLI's 141)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunelab.cli", "init", "--task", "classification", *json_flag],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # as `head` does once it has what it wants
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and "Traceback" not in stderr, stderr


def test_under_torchrun_only_rank_0_answers_on_stdout(make_lab, capsys, monkeypatch):
    """A refusal under torchrun was printed once per rank, so `--json` read two objects."""
    lab = str(make_lab())
    argv = ["run", "--lab", lab, "training.strategy=fdsp", "--json"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "training.strategy" in json.loads(out)["error"] and err == ""
    monkeypatch.setenv("RANK", "1")
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error (run, rank 1): ") and "training.strategy" in err


def test_a_closed_pipe_on_stderr_stops_no_command(make_lab):
    """`tunelab data 2>&1 | head -2` exited 1 and wrote no data version: a progress line on
    the closed pipe raised inside the step, an internal error. The step now finishes."""
    lab = make_lab()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunelab.cli", "data", "--lab", str(lab)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stderr.close()  # the reader of the progress lines is gone
    out = proc.stdout.read().decode()
    assert proc.wait(timeout=120) == 0, out
    assert "data version" in out and (lab / ".tunelab" / "data" / "CURRENT").is_file()


def test_a_command_whose_work_is_recorded_ignores_a_sigterm_that_another_thread_gets():
    """Blocked in the main thread alone, a SIGTERM the kernel handed a thread started earlier
    (torch's, the tokenizers') ended a recorded baseline with 143 in 3 of 5 tries."""
    import subprocess
    import sys

    code = (
        "import os, signal, threading, time\n"
        "from tunelab import cli\n"
        "threading.Thread(target=time.sleep, args=(3,), daemon=True).start()\n"
        "cli._hold_signals()\n"
        "for sig in (signal.SIGTERM, signal.SIGINT):\n"
        "    os.kill(os.getpid(), sig)\n"
        "time.sleep(0.5)\n"
        "print('printed whole')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "printed whole\n"), done.stderr
