"""`verify` fails where it must, on a bundle whose listing still matches: the stored predictions
the model no longer gives (its core check, which no fast test had made fail), and a file put in
beside the weights."""

from __future__ import annotations

import json

from conftest import copy_of, tl
from tunelab.core.digest import sha256_file


def _relisted(bundle, name: str) -> None:
    """`name`'s line in SHA256SUMS made to match the file as it now is."""
    sums = bundle / "SHA256SUMS"
    lines = [
        f"{sha256_file(bundle / name)}  {name}" if line.endswith(f"  {name}") else line
        for line in sums.read_text().splitlines()
    ]
    sums.write_text("\n".join(lines) + "\n")


def test_stored_predictions_the_model_does_not_give_fail_verify(exported, tmp_path, capsys):
    bundle = copy_of(exported[1], tmp_path)
    path = bundle / "verify" / "sample.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    labels = sorted({r["prediction"]["predicted"] for r in rows} | {"business", "sport", "tech"})
    for r in rows:  # every stored prediction swapped for another label
        said = r["prediction"]["predicted"]
        r["prediction"]["predicted"] = next(label for label in labels if label != said)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _relisted(bundle, "verify/sample.jsonl")
    code, result = tl(capsys, "verify", str(bundle))
    items = {i["name"]: i for i in result["items"]}
    assert items["files"]["passed"] and items["load"]["passed"]
    assert code == 1 and not items["predictions"]["passed"]
    assert items["predictions"]["detail"].startswith(f"0 of {len(rows)} validation predictions")


def test_a_file_put_in_the_bundle_fails_verify(exported, tmp_path, capsys):
    bundle = copy_of(exported[1], tmp_path)
    (bundle / "extra.py").write_text("print('hi')\n")
    code, result = tl(capsys, "verify", str(bundle))
    files = result["items"][0]
    assert code == 1 and not files["passed"] and files["unlisted"] == ["extra.py"]
    assert "not listed: ['extra.py']" in files["detail"]
