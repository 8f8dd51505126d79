"""A data step stopped between writing its version, logging it and making it current: what
`fsck` names, and `tunelab data` run again mending it."""

from __future__ import annotations

from conftest import tl
from tunelab.cli import main
from tunelab.core.store import Store


def _stopped(*args, **kwargs):
    raise KeyboardInterrupt  # a stop at that moment, as a kill -9 leaves the files


def _current(lab) -> str:
    return (lab / ".tunelab" / "data" / "CURRENT").read_text().strip()


def test_a_version_the_data_step_never_logged_is_named_and_data_again_logs_it(
    make_lab, capsys, monkeypatch
):
    """A version written and never logged read clean ("checked 0 log lines ... clean")."""
    lab = make_lab()
    where = ["--lab", str(lab)]
    code, first = tl(capsys, "data", *where)
    assert code == 0
    import tunelab.data.pipeline as pipeline

    with monkeypatch.context() as patch:  # stopped after the version is written, before its event
        patch.setattr(pipeline, "publish", _stopped)
        assert main(["data", *where, "data.split.seed=5"]) == 130
    capsys.readouterr()
    new = {p.name for p in (lab / ".tunelab" / "data").iterdir() if p.is_dir()} - {first["version"]}
    assert len(new) == 1 and _current(lab) == first["version"]
    (version,) = new
    code, found = tl(capsys, "fsck", *where)
    assert code == 1
    assert [(p["check"], p["path"]) for p in found["problems"]] == [
        ("data", f".tunelab/data/{version}")
    ]
    assert "no `data` event in the log names this version" in found["problems"][0]["problem"]
    code, again = tl(capsys, "data", *where, "data.split.seed=5")
    assert code == 0 and again["version"] == version and _current(lab) == version
    assert tl(capsys, "fsck", *where)[1]["passed"]


def test_current_follows_the_log_and_a_step_stopped_between_them_is_named(
    make_lab, capsys, monkeypatch
):
    """CURRENT was written before the data event, so a stop between them left the current
    data a version no event named; now the event comes first and CURRENT after it, under the
    log's lock, and fsck names a CURRENT the log's last data step did not set."""
    lab = make_lab()
    where = ["--lab", str(lab)]
    code, first = tl(capsys, "data", *where)
    assert code == 0
    with monkeypatch.context() as patch:  # stopped after its event, before CURRENT
        patch.setattr(Store, "set_current_data", _stopped)
        assert main(["data", *where, "data.split.seed=5"]) == 130
    capsys.readouterr()
    steps = [e for e in Store(lab).events() if e["event"] == "data"]
    new = steps[-1]["version"]
    assert len(steps) == 2 and new != first["version"] and _current(lab) == first["version"]
    code, found = tl(capsys, "fsck", *where)
    assert code == 1 and [p["path"] for p in found["problems"]] == [".tunelab/data/CURRENT"]
    assert f"made {new} current" in found["problems"][0]["problem"]
    assert tl(capsys, "data", *where, "data.split.seed=5")[0] == 0
    assert _current(lab) == new and tl(capsys, "fsck", *where)[1]["passed"]


def test_fsck_repair_accepts_a_version_the_log_does_not_name(make_lab, capsys, monkeypatch):
    lab = make_lab()
    where = ["--lab", str(lab)]
    assert tl(capsys, "data", *where)[0] == 0
    import tunelab.data.pipeline as pipeline

    with monkeypatch.context() as patch:
        patch.setattr(pipeline, "publish", _stopped)
        assert main(["data", *where, "data.split.seed=5"]) == 130
    capsys.readouterr()
    code, repaired = tl(capsys, "fsck", "--repair", "--reason", "kept on purpose", *where)
    assert code == 0 and repaired["passed"], repaired["problems"]
