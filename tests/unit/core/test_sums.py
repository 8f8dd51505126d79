"""A bundle's SHA256SUMS read without reading outside the bundle; links are not its files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tunelab.core.sums import BundleError, compare, listed, require_plain, write_sums
from tunelab.stages.export.load import load_bundle
from tunelab.stages.export.verify import check_files


def bundle_at(tmp_path: Path) -> Path:
    bundle = tmp_path / "bundle"
    (bundle / "verify").mkdir(parents=True)
    (bundle / "tunelab.json").write_text("{}")
    (bundle / "verify" / "sample.jsonl").write_text('{"id": 1}\n')
    write_sums(bundle)
    return bundle


def add_line(bundle: Path, name: str, digest: str = "0" * 64) -> None:
    with (bundle / "SHA256SUMS").open("a") as f:
        f.write(f"{digest}  {name}\n")


@pytest.mark.parametrize(
    "name", ["../../../../etc/passwd", "/etc/passwd", "verify/../../outside.txt"]
)
def test_a_listed_path_outside_the_bundle_is_refused_unopened(tmp_path, name, monkeypatch):
    bundle = bundle_at(tmp_path)
    add_line(bundle, name)
    opened = []
    monkeypatch.setattr("tunelab.core.sums.sha256_file", lambda p: opened.append(p))
    with pytest.raises(BundleError, match=r"SHA256SUMS:3: names .* outside the bundle"):
        listed(bundle)
    found = check_files(bundle)
    assert not found["passed"] and "outside the bundle" in found["detail"] and opened == []
    with pytest.raises(BundleError, match="SHA256SUMS:3"):
        load_bundle(bundle)  # before tunelab.json or any weight is read


def test_a_listed_name_that_leads_out_through_a_link_is_refused(tmp_path):
    bundle = bundle_at(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret").write_text("x")
    os.symlink(tmp_path / "elsewhere", bundle / "out")
    add_line(bundle, "out/secret")
    with pytest.raises(BundleError, match="through a link"):
        listed(bundle)


def test_a_bundle_file_replaced_by_a_link_to_an_identical_copy_is_refused(tmp_path):
    bundle = bundle_at(tmp_path)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes((bundle / "verify" / "sample.jsonl").read_bytes())
    (bundle / "verify" / "sample.jsonl").unlink()
    os.symlink(copy, bundle / "verify" / "sample.jsonl")
    found = check_files(bundle)
    assert not found["passed"] and "verify/sample.jsonl" in found["detail"]
    assert "through a link" in found["detail"]
    with pytest.raises(BundleError, match="through a link"):
        load_bundle(bundle)


def test_a_link_that_stays_inside_the_bundle_is_still_not_its_file(tmp_path):
    bundle = bundle_at(tmp_path)
    twin = bundle / "verify" / "twin.jsonl"
    twin.write_bytes((bundle / "verify" / "sample.jsonl").read_bytes())
    write_sums(bundle)
    (bundle / "verify" / "sample.jsonl").unlink()
    os.symlink(twin, bundle / "verify" / "sample.jsonl")
    assert compare(bundle, listed(bundle))["changed"] == ["verify/sample.jsonl"]
    found = check_files(bundle)
    assert not found["passed"] and found["changed"] == ["verify/sample.jsonl"]
    with pytest.raises(BundleError, match=r"verify/sample\.jsonl is a link"):
        require_plain(bundle)
    with pytest.raises(BundleError, match="is a link"):
        load_bundle(bundle)


def test_an_unlisted_link_is_named(tmp_path):
    bundle = bundle_at(tmp_path)
    os.symlink(bundle / "verify", bundle / "extra")
    assert compare(bundle, listed(bundle))["unlisted"] == ["extra"]


def test_a_plain_bundle_passes(tmp_path):
    bundle = bundle_at(tmp_path)
    assert check_files(bundle)["passed"]
    assert set(require_plain(bundle)) == {"tunelab.json", "verify/sample.jsonl"}
