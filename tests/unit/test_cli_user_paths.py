"""Small parts of the command-line contract: a path the user gave that runs through a file is
the user's to fix (exit 2), and the version is asked for without a command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tunelab.cli import main


@pytest.mark.parametrize(
    "command", [["init", "--lab", "{file}"], ["report", "--out", "{file}/r.html"]]
)
def test_a_path_through_a_file_is_the_user_s_to_fix(tmp_path, capsys, command, make_lab):
    """`init --lab setup.py`, `report --out setup.py/r.html`: 'internal error:
    FileExistsError', exit 1, for a typo (hU F1)."""
    file = tmp_path / "setup.py"
    file.write_text("print()\n")
    given = [part.replace("{file}", str(file)) for part in command]
    if command[0] == "report":
        given += ["--lab", str(make_lab())]
    assert main([*given, "--json"]) == 2
    said = json.loads(capsys.readouterr().out)["error"]
    assert said.startswith(f"{file}: File exists: a file is where that path needs a folder.")


def test_the_version_is_asked_for_without_a_command(capsys):
    """`tunelab --version` had been refused: "the following arguments are required"."""
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"tunelab {version('tunelab')}\n"


@pytest.mark.parametrize("wrong", [["frob"], ["runs", "x=1"], ["runs", "--lab", "no/such/lab"]])
def test_an_error_to_a_reader_that_stopped_reading_keeps_its_exit_code(tmp_path, wrong):
    """`tunelab compare x=1 --json | head -c 50` ended in a BrokenPipeError traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunelab.cli", *wrong, "--json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # as `head` does before the line is written
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 2 and "Traceback" not in stderr, stderr


def test_a_reason_without_repair_is_refused_not_dropped(tmp_path, capsys):
    """`fsck --reason x` exited 1 with the lab's problems and said nothing of the reason."""
    assert main(["fsck", "--lab", str(tmp_path), "--reason", "moved disks", "--json"]) == 2
    said = json.loads(capsys.readouterr().out)["error"]
    assert said == "--reason goes with --repair: `tunelab fsck --repair --reason R`"


def test_a_demo_s_runs_are_timed_from_their_opening_not_the_demo_s_start():
    """The demo's plan charged each variant the data step, check and baselines before it
    (262 s planned where the variant took about 180; hX F1)."""
    from tunelab.cli import one_stage

    assert not one_stage(["demo", "classification", "--dir", "x"])
    assert not one_stage(["--json", "demo"])
    assert one_stage(["run", "--name", "demo"]) and one_stage(["plan"])
