"""A bundle in its lab is held to the SHA256SUMS its export recorded: a card rewritten (or a
file removed) together with its line in SHA256SUMS passes every check against the bundle's own
listing, and only the export record's `sums_sha256` tells."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import tl
from tunelab.core.sums import write_sums


def test_a_card_rewritten_with_its_listing_fails_verify_and_fsck(exported, tmp_path, capsys):
    lab, bundle = exported
    copy = Path(shutil.copytree(lab, tmp_path / "copy"))
    inside = copy / bundle.relative_to(lab)
    card = inside / "README.md"
    card.write_text(card.read_text() + "\nThe verdict is **improved**.\n")
    (inside / "template.json").unlink(missing_ok=True)
    write_sums(inside)  # the listing made to match what the bundle now holds
    code, result = tl(capsys, "verify", str(inside))
    files = result["items"][0]
    assert code == 1 and files["name"] == "files" and not files["passed"]
    assert files["detail"].startswith("SHA256SUMS is not the one the export wrote (sha256 ")
    assert "not listed now: template.json" in files["detail"]
    assert "files were changed together with their listing" in files["detail"]
    assert result["fix"].startswith("the bundle is not as it was exported")
    code, checked = tl(capsys, "fsck", "--lab", str(copy))
    said = [p for p in checked["problems"] if p["check"] == "bundle"]
    assert code == 1 and len(said) == 1 and said[0]["path"].endswith("SHA256SUMS")
    assert "SHA256SUMS is not the one the export wrote" in said[0]["problem"]


def test_a_bundle_as_exported_is_clean_in_fsck(exported, capsys):
    lab, _ = exported
    code, checked = tl(capsys, "fsck", "--lab", str(lab))
    assert code == 0 and checked["problems"] == []
