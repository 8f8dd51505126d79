"""What a bundle hands over of its data version's manifest: no path of the exporter's machine."""

from tunelab.stages.export.bundle import handed_manifest


def test_a_bundle_s_manifest_names_its_sources_as_the_lab_does_not_where_they_were_read():
    """A bundle exported from a copy of a lab still named the original lab's absolute path."""
    source = {
        "path": "data/docs.jsonl",
        "sha256": "ab",
        "resolved": "/home/ann/lab/data/docs.jsonl",
    }
    folder = {"path": "pages", "files": ["a.txt"], "resolved": "/home/ann/lab/pages"}
    manifest = {"version": "v1", "sources": [source, folder | {"links": {"a.txt": "/x/a.txt"}}]}
    handed = handed_manifest(manifest)
    assert handed["sources"] == [
        {"path": "data/docs.jsonl", "sha256": "ab"},
        {"path": "pages", "files": ["a.txt"]},
    ]
    assert "/home/ann" not in str(handed) and manifest["sources"][0]["resolved"]  # a copy
    assert handed_manifest({"version": "v0"}) == {"version": "v0"}
