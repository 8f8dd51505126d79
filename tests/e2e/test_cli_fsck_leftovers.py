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
    code, found = tl(capsys, "fsck", *where)
    assert code == 1
    leftovers = {p["path"]: p["problem"] for p in found["problems"] if p["check"] == "leftover"}
    assert "killed" in leftovers[".tunelab/runs/r001-majority/checkpoint.new"]
    assert "reserved" in leftovers[".tunelab/comparisons/c002.json"]
    assert (
        "left by a size that was killed" in leftovers[".tunelab/sizing/scratch/scratch-model-982"]
    )
