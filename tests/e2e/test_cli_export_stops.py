"""An export stopped by Ctrl-C or SIGTERM leaves a bundle that is recorded, or none at all, and
says how to run it again."""

from __future__ import annotations

import pytest

from tunelab.core.errors import Interrupted
from tunelab.core.lab import open_lab
from tunelab.stages.export import bundle


def _stopped(*args, **kwargs):
    raise KeyboardInterrupt


def test_an_interrupted_export_to_an_out_says_to_run_it_again_with_that_out(
    exported, tmp_path, monkeypatch
):
    """It said to run `tunelab export r003-lora` again, which then wrote elsewhere."""
    monkeypatch.setattr(bundle, "_write_bundle", _stopped)
    out = tmp_path / "b5"
    with pytest.raises(Interrupted) as err:
        bundle.export_run(open_lab(exported[0]), "r003-lora", out)
    assert f"run `tunelab export r003-lora --out {out}` again" in err.value.outcome


def test_a_stop_after_the_bundle_is_written_leaves_none_that_no_record_names(
    exported, tmp_path, monkeypatch
):
    """Stopped as it was being recorded, the bundle stayed whole and unrecorded, and the
    message said that whatever was finished is recorded."""
    monkeypatch.setattr(bundle, "_record", _stopped)
    out = tmp_path / "b6"
    with pytest.raises(Interrupted) as err:
        bundle.export_run(open_lab(exported[0]), "r003-lora", out)
    assert "no bundle was recorded (the one written is removed)" in err.value.outcome
    assert not out.exists()
    events = [e for e in open_lab(exported[0]).store.events() if e.get("bundle") == str(out)]
    assert events == []


def test_an_export_to_an_out_elsewhere_removes_what_a_killed_one_left_beside_it(exported, tmp_path):
    """Outside bundles/, a killed export's hidden folder (merged weights and all) stayed for
    ever: neither the next export nor fsck looked beside the --out."""
    killed = tmp_path / ".b7.k1ll3d00.tmp"  # this bundle's, as atomic_dir names it
    others = [tmp_path / ".notes.k1ll3d00.tmp", tmp_path / ".b7.tmp"]  # the user's, or no such
    for folder in [killed, *others]:
        folder.mkdir()
    (killed / "adapter_model.safetensors").write_bytes(b"half a file")
    result = bundle.export_run(open_lab(exported[0]), "r003-lora", tmp_path / "b7")
    assert result["leftovers_removed"] == [killed.name]
    assert not killed.exists() and all(folder.exists() for folder in others)
