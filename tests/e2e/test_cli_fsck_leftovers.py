"""`tunelab fsck` names what a killed command left behind: a half-written checkpoint, a
numbered record reserved and never written, what a killed `size` left in its scratch folder."""

from __future__ import annotations

from test_cli_fsck import tl


def test_what_a_killed_command_left_behind_is_named(make_lab, capsys):
    """A half-written checkpoint.new and a reserved comparison never written read clean."""
    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"]):
        assert tl(capsys, *command, *where)[0] == 0
    store = lab / ".tunelab"
    (store / "runs" / "r001-majority" / "checkpoint.new").mkdir()
    (store / "comparisons").mkdir(exist_ok=True)
    (store / "comparisons" / "c002.json").write_text("")
    scratch = store / "sizing" / "scratch" / "scratch-model-982"  # a size killed with -9
    scratch.mkdir(parents=True)
    (scratch / "model.safetensors").write_bytes(b"")
    tmp = store / "data" / ".aee8c6e5672a.5yxcky78.tmp"  # a data step killed while writing
    (tmp / ".manifest.json.k4hi3bs8.tmp").mkdir(parents=True)  # one leftover, not two
    code, found = tl(capsys, "fsck", *where)
    assert code == 1
    leftovers = {p["path"]: p["problem"] for p in found["problems"] if p["check"] == "leftover"}
    assert (
        "killed or stopped by a full disk"
        in leftovers[".tunelab/runs/r001-majority/checkpoint.new"]
    )
    assert "reserved" in leftovers[".tunelab/comparisons/c002.json"]
    assert (
        "left by a size that was killed" in leftovers[".tunelab/sizing/scratch/scratch-model-982"]
    )
    tmps = [p for p in found["problems"] if p["path"].endswith(".tmp")]
    assert [p["path"] for p in tmps] == [".tunelab/data/.aee8c6e5672a.5yxcky78.tmp"]
    assert "--repair leaves it" in tmps[0]["fix"]


def test_a_store_with_no_log_yet_reads_clean_without_a_head(tmp_path):
    """It read "clean (log head None)"."""
    import io

    from rich.console import Console

    from tunelab.views.fsck import fsck as show

    out = Console(file=io.StringIO(), width=200)
    result = {"lab": str(tmp_path), "checked": {}, "problems": [], "not_checked": []}
    show(result | {"passed": True, "log": {"unchained": 0, "breaks": [], "head": None}}, out)
    assert "clean (no log yet)" in out.file.getvalue()


def test_a_run_copied_in_from_a_clone_over_one_of_the_log_s_is_named_as_another_run(
    make_lab, capsys
):
    """Two clones of a lab each trained an r002; B's folder copied over A's read only "record
    changed ... restore it from a backup", and `fsck --repair` made A's run's loss final."""
    import json

    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"]):
        assert tl(capsys, *command, *where)[0] == 0
    runs = lab / ".tunelab" / "runs"
    record = runs / "r001-majority" / "record.json"
    copied = json.loads(record.read_text()) | {"created": "2026-01-01T00:00:00+00:00"}
    record.write_text(json.dumps(copied))
    code, found = tl(capsys, "fsck", *where)
    assert code == 1
    (problem,) = [
        p for p in found["problems"] if p["path"] == ".tunelab/runs/r001-majority/record.json"
    ]
    assert problem["problem"].startswith("another run's record under this id: created 2026-01-01")
    assert "went with it" in problem["problem"] and "make the loss final" in problem["fix"]
    # accepted anyway: the break says, in the log itself, which run the copy replaced
    code, repaired = tl(capsys, "fsck", *where, "--repair", "--reason", "merged a clone")
    (replaced,) = repaired["log"]["breaks"][-1]["replaced"].items()
    assert replaced[0] == ".tunelab/runs/r001-majority/record.json"
    assert replaced[1].startswith("another run's record under this id")
