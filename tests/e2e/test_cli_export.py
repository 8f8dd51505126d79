"""The handover: a bundle PEFT itself can load, bound to its exact base, and `verify` that
names what is wrong."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from peft import PeftModel
from safetensors.torch import load_file, save_file
from transformers import AutoModelForSequenceClassification, AutoTokenizer

import tunelab
from conftest import copy_of, tl
from tunelab.core.errors import TunelabError
from tunelab.core.spec import validate_spec
from tunelab.modeling.render import make_renderer
from tunelab.training.evaluate import evaluate_rows


def test_the_bundle_holds_the_handover_and_peft_loads_it(exported, tiny_bert, capsys):
    lab, bundle = exported
    capsys.readouterr()
    record = json.loads((lab / ".tunelab/exports/1-r003-lora.json").read_text())
    assert record["sums_sha256"] == tunelab.core.digest.sha256_file(bundle / "SHA256SUMS")
    names = {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()}
    assert {
        "adapter_config.json",
        "adapter_model.safetensors",
        "tunelab.json",
        "README.md",
        "SHA256SUMS",
        "template.json",
        "verify/sample.jsonl",
        "merged/model.safetensors",
    } <= names
    info = json.loads((bundle / "tunelab.json").read_text())
    assert info["base_model"]["files"]["model.safetensors"] == tunelab_sha(tiny_bert)
    assert info["comparison"]["row"]["id"] == "r003-lora" and info["test_access_log"] == []
    assert info["merge_check"]["agree"] and info["merge_check"]["max_abs_logit_diff"] < 1e-4
    check = info["merge_check"]  # held in proportion to the logits' own scale
    assert check["tolerance_rule"].startswith("0.0001 x max(1, largest |logit|)")
    assert check["tolerance"] >= 1e-4
    card = (bundle / "README.md").read_text()
    assert card.startswith("---\nbase_model: tiny-bert\nlibrary_name: peft\n")
    assert "model-index:" in card and "## Limitations" in card
    # it had said the adapter "loads only on" its base, which PEFT's own loader never checks
    said = " ".join(card.split())
    assert "`tunelab.load_bundle` and `tunelab verify` refuse any other base; PEFT's own" in said
    # the new head is kept whole (modules_to_save): LoRA-only engines refuse it, merged/ serves
    assert info["serving"]["plain_lora"] is False
    assert info["serving"]["why"][0].startswith("modules_to_save ['classifier'")
    assert "**Not a plain LoRA" in card and "Serve merged/" in card

    # PEFT's own loader, on the base, gives the run's predictions
    labels = info["labels"]
    base = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=len(labels))
    model = PeftModel.from_pretrained(base, bundle).eval()
    sample = [
        json.loads(line)
        for line in (bundle / "verify/sample.jsonl").read_text().split("\n")
        if line
    ]
    spec = validate_spec(info["spec"])
    renderer = make_renderer(spec, AutoTokenizer.from_pretrained(bundle), labels, bundle)
    predicted, _ = evaluate_rows(
        model, renderer, [s["row"] for s in sample], 16, 8, torch.device("cpu")
    )
    assert [p["predicted"] for p in predicted] == [s["prediction"]["predicted"] for s in sample]


def test_the_card_says_when_test_rows_have_copies_in_validation(exported):
    """A final whose test rows include copies of validation rows: the card's numbers say how
    many, since the run was chosen on those copies; none, and it says nothing."""
    from tunelab.stages.export.card import body

    _, bundle = exported
    info = json.loads((bundle / "tunelab.json").read_text())
    metrics = {"n": 40, "accuracy": 0.9, "macro_f1": 0.88}
    without = {"n": 37, "metric": "macro_f1", "value": 0.8612}
    copied = {"rows": 3, "pairs": 4, "file": ".tunelab/data/v/duplicates.jsonl", "without": without}
    card = " ".join(
        body(info | {"final": {"metrics": metrics, "copied_in_validation": copied}}).split()
    )
    assert "3 of the 40 test rows have an exact or near copy in validation" in card
    assert "(4 pairs, listed in the data version's duplicates.jsonl)" in card
    assert "On the 37 test rows without one, macro_f1 is 86.1." in card
    for none in ({**copied, "rows": 0, "pairs": 0}, None):
        quiet = body(info | {"final": {"metrics": metrics, "copied_in_validation": none}})
        assert "copy in validation" not in quiet
    interval = {"metric": "macro_f1", "low": 0.7712, "high": 0.9581, "level": 0.95, "n": 40}
    card = body(info | {"final": {"metrics": metrics, "interval": interval}})
    assert "| 88.0 (95%: 77.1 to 95.8) |" in card  # the examples' noise on the test score
    assert "| 90.0 |" in card  # accuracy: no interval was drawn for it
    access = {"time": "2026-12-06T21:21:35+00:00", "run": "r003-lora"}
    for log, said in (([access], "once"), ([access] * 2, "2 times")):
        card = body(info | {"test_access_log": log})
        assert f"The sealed test split was opened {said} in this lab." in card  # not "time(s)"
    assert "test split has not been opened in this lab." in body(info | {"test_access_log": []})


def test_the_cards_gguf_paragraph_says_what_the_file_holds(exported):
    """A LoRA's GGUF file is the LoRA merged into the base; a full fine-tune's, the model."""
    from tunelab.stages.export.card import body

    _, bundle = exported
    info = json.loads((bundle / "tunelab.json").read_text())
    tokenizer = {"chat_template": False, "bos": 1, "eos": 2}
    gguf = {"file": "gguf/model.gguf", "architecture": "llama", "dtype": "q8_0", "tensors": 9}
    for method, holds in (
        ("lora", "the LoRA merged into the base"),
        ("full", "the fine-tuned model"),
    ):
        card = " ".join(
            body(info | {"method": method, "gguf": gguf | {"tokenizer": tokenizer}}).split()
        )
        assert (
            f"`gguf/model.gguf`: {holds} as one GGUF file for llama.cpp (llama, q8_0, 9 tensors)"
            in card
        )
        assert "with the run's tokenizer, BOS and EOS embedded" in card  # no template to embed
    assert "GGUF" not in body(info | {"gguf": None})


def tunelab_sha(model_dir: Path) -> str:
    import hashlib

    return hashlib.sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()


def test_verify_takes_its_device_as_the_lab_commands_do(exported, monkeypatch, capsys):
    """`--device`, else TUNELAB_DEVICE: one this machine lacks is refused by name (exit 2); it
    had been ignored, or found as a broken bundle's load (exit 1)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: nothing to refuse")
    _, bundle = exported
    code, err = tl(capsys, "verify", str(bundle), "--device", "cuda")
    assert code == 2 and err["error"].startswith("--device 'cuda': this machine has 0 CUDA")
    monkeypatch.setenv("TUNELAB_DEVICE", "cuda")
    code, err = tl(capsys, "verify", str(bundle))
    assert code == 2 and err["error"].startswith("TUNELAB_DEVICE 'cuda'")


def test_an_out_that_is_a_file_is_refused_by_name(exported, tmp_path, capsys):
    lab, _ = exported
    taken = tmp_path / "notes.txt"
    taken.write_text("mine")
    code, err = tl(capsys, "export", "r003-lora", "--lab", str(lab), "--out", str(taken))
    assert code == 2 and err["error"] == (
        f"{taken} is a file, not a folder; give --out a folder to write into."
    )
    assert taken.read_text() == "mine"
    code, err = tl(capsys, "export", "r003-lora", "--lab", str(lab), "--merge")  # bundled already
    bundle = lab / "bundles" / "r003-lora"
    assert code == 2 and f"give another --out (--out {bundle}-merged) or remove" in err["error"]


def test_an_out_relative_to_the_shell_is_recorded_where_it_is(
    exported, tmp_path, capsys, monkeypatch
):
    """`cd /tmp && export --lab L --out s64/b` recorded `s64/b`, a path the lab cannot find."""
    lab, _ = exported
    monkeypatch.chdir(tmp_path)
    code, result = tl(capsys, "export", "r003-lora", "--lab", str(lab), "--out", "elsewhere/b")
    assert code == 0, result
    where = str((tmp_path / "elsewhere" / "b").resolve())
    assert result["bundle"] == where
    recorded = [json.loads(p.read_text()) for p in (lab / ".tunelab" / "exports").glob("*.json")]
    assert where in [r["bundle"] for r in recorded]
    # the merge it points to names the bundle where it now is (it named the folder being
    # written, `.b.mafjxj0b.tmp`), and the lab, which is elsewhere: absolute, as the card
    # that holds it is read elsewhere (`elsewhere/b-merged` meant nothing there)
    assert result["serving"]["servable"].endswith(
        f"`tunelab export r003-lora --merge --out {where}-merged --lab {lab.resolve()}`"
    )


def test_a_gguf_of_a_classifier_is_refused_saying_what_it_is(exported, tmp_path, capsys):
    lab, _ = exported
    out = tmp_path / "gguf-bundle"
    code, err = tl(capsys, "export", "r003-lora", "--lab", str(lab), "--gguf", "--out", str(out))
    assert code == 2  # "an encoder model", not "a encoder model", and what to do
    assert err["error"].endswith("this run is an encoder model: export it without --gguf")
    assert not out.exists() or not any(out.iterdir())  # no bundle left half-written


def test_verify_passes_on_the_bundle_in_a_fresh_process(exported, capsys):
    lab, bundle = exported
    code, result = tl(capsys, "verify", str(bundle))
    assert code == 0 and result["passed"] and result["process"]["fresh"]
    # a bundle in the lab that exported it: the outcome goes into the export's record
    record = json.loads((lab / result["recorded"]).read_text())
    assert record["bundle"] == str(bundle) and record["verified"]["passed"] is True
    assert record["verified"]["seconds"] == result["seconds"]
    names = [i["name"] for i in result["items"]]
    assert names == ["files", "base", "load", "predictions", "merged"]
    assert "every one must (same device type, float32)" in result["items"][3]["detail"]
    merged = result["items"][-1]  # the servable form, opened as a serving engine opens it
    assert merged["passed"] and "AutoModelForSequenceClassification alone" in merged["detail"]
    assert merged["exact"] and merged["differ"] == []


def test_a_flipped_byte_is_named_by_verify(exported, tmp_path, capsys):
    bundle = copy_of(exported[1], tmp_path)
    weights = bundle / "adapter_model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 0x01
    weights.write_bytes(bytes(raw))
    code, result = tl(capsys, "verify", str(bundle))
    files = result["items"][0]
    assert code == 1 and not result["passed"] and result["recorded"] is None  # not in a lab
    assert result["not_recorded"].startswith("the bundle lies in no lab")  # said, not left out
    assert files["changed"] == ["adapter_model.safetensors"] and "changed" in files["detail"]
    assert result["fix"].startswith("the bundle is not as it was exported: get it again")
    assert "(`tunelab export r003-lora`)" in result["fix"]


def test_a_missing_file_is_named_and_no_load_says_something_else(exported, tmp_path, capsys):
    """The load went on and failed with transformers' advice to install sentencepiece."""
    bundle = copy_of(exported[1], tmp_path)
    (bundle / "tokenizer.json").unlink()
    code, result = tl(capsys, "verify", str(bundle))
    items = {i["name"]: i for i in result["items"]}
    assert code == 1 and items["files"]["missing"] == ["tokenizer.json"]
    assert (
        items["load"]["detail"] == "not run: listed files are missing (tokenizer.json); see files"
    )
    assert result["fix"].startswith("the bundle is not as it was exported")


def test_a_listing_that_leads_out_of_the_bundle_opens_nothing_it_lists(exported, tmp_path, capsys):
    """`files` refused the `..` name, and then `merged` loaded merged/ all the same."""
    bundle = copy_of(exported[1], tmp_path)
    sums = bundle / "SHA256SUMS"
    first, *rest = sums.read_text().splitlines()
    sums.write_text("\n".join([first.split("  ")[0] + "  ../README.md", *rest]) + "\n")
    code, result = tl(capsys, "verify", str(bundle))
    items = {i["name"]: i for i in result["items"]}
    assert code == 1 and "a path outside the bundle" in items["files"]["detail"]
    for name in ("load", "predictions", "merged"):
        assert items[name].get("skipped") and not items[name]["passed"], name
    assert "nothing it lists is opened" in items["merged"]["detail"]


def test_a_same_shaped_base_with_other_weights_is_refused(exported, tiny_bert, tmp_path, capsys):
    _, bundle = exported
    other = Path(shutil.copytree(tiny_bert, tmp_path / "tiny-bert-retrained"))
    tensors = load_file(other / "model.safetensors")
    name = next(iter(tensors))
    tensors[name] = tensors[name] + 0.01  # same architecture, different weights
    save_file(tensors, other / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(TunelabError, match=r"trained on tiny-bert .* weights sha256") as err:
        tunelab.load_bundle(bundle, base=other)
    assert str(other) in str(err.value)
    code, result = tl(capsys, "verify", str(bundle), "--base", str(other))
    assert code == 1 and result["items"][1]["name"] == "base" and not result["items"][1]["passed"]
    assert str(other) in result["items"][1]["detail"]


def test_a_base_with_its_weights_and_another_config_is_refused(
    exported, tiny_bert, tmp_path, capsys
):
    """The bundle hashed the base's config.json and only its weights were compared: a base
    whose activation was changed verified 'as recorded' and loaded in silence. A changed
    tokenizer file is said (the bundle's own tokenizer is the one loaded)."""
    _, bundle = exported
    other = Path(shutil.copytree(tiny_bert, tmp_path / "tiny-bert-relu"))
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps(config | {"hidden_act": "relu"}))
    with pytest.raises(TunelabError, match=r"holds its weights, but its config\.json differs"):
        tunelab.load_bundle(bundle, base=other)
    code, result = tl(capsys, "verify", str(bundle), "--base", str(other))
    base = result["items"][1]
    assert code == 1 and base["name"] == "base" and not base["passed"]
    assert "config.json: " in base["detail"] and "recorded" in base["detail"]
    told = Path(shutil.copytree(tiny_bert, tmp_path / "tiny-bert-tokenizer"))
    with (told / "tokenizer_config.json").open("a") as f:
        f.write("\n")
    code, result = tl(capsys, "verify", str(bundle), "--base", str(told))
    base = result["items"][1]
    assert code == 0 and base["passed"]
    assert "(tokenizer_config.json differs from the base's at export" in base["detail"]


def test_a_base_that_is_not_where_recorded_asks_for_base(exported, tmp_path, capsys):
    _, bundle = exported
    code, result = tl(capsys, "verify", str(bundle), "--base", str(tmp_path / "gone"))
    assert code == 2 and result["error"].startswith(f"no base model at {tmp_path / 'gone'} (")
    assert "nothing was verified or recorded" in result["error"]  # not a failed verification
    assert "`tunelab verify BUNDLE --base PATH`" in result["error"]
    with pytest.raises(TunelabError, match=r"no base model at .*base=PATH"):
        tunelab.load_bundle(bundle, base=tmp_path / "gone")


def test_the_next_export_removes_what_killed_exports_left_in_bundles(exported, capsys):
    lab, _ = exported
    bundles = lab / "bundles"
    killed = bundles / ".r003-lora.k1ll3d00.tmp"  # the hidden folder atomic_dir leaves
    killed.mkdir()
    (killed / "adapter_model.safetensors").write_bytes(b"half a file")
    running = bundles / ".r003-lora.runn1ng0.tmp"  # an export in another process, writing
    running.mkdir()
    planted = [killed, running, bundles / ".keep", lab / ".r003-lora.0uts1de0.tmp"]
    for folder in planted[2:]:  # hidden but not of the pattern; of the pattern, not in bundles/
        folder.mkdir()
    held = os.open(running, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        code, result = tl(
            capsys, "export", "r003-lora", "--lab", str(lab), "--out", str(bundles / "again")
        )
    finally:
        os.close(held)
    assert code == 0, result
    assert result["leftovers_removed"] == [killed.name]
    assert [p.exists() for p in planted] == [False, True, True, True]
    record = json.loads((lab / result["file"]).read_text())
    assert record["leftovers_removed"] == [killed.name]  # the lab's record says so too
    assert not [p for p in bundles.iterdir() if p.name.startswith(".again.")]
    for folder in planted[1:]:
        folder.rmdir()
    shutil.rmtree(bundles / "again")


def test_the_cards_verdict_says_what_its_interval_counts(exported):
    """One seed and no noise record: the examples alone, and a new seed could move it; a
    seed-aware interval says it counts the seeds."""
    from tunelab.stages.export.card import body

    _, bundle = exported
    info = json.loads((bundle / "tunelab.json").read_text())
    card = " ".join(body(info).split())
    assert (
        "over the validation examples of one seed (how far a new seed would move it is not" in card
    )
    seeded = json.loads(json.dumps(info))
    seeded["comparison"]["row"]["vs_reference"]["bootstrap"]["basis"] = "seeds and examples"
    card = " ".join(body(seeded).split())
    assert "95% paired bootstrap interval" in card and "over the seeds and the validation" in card
    assert "of one seed" not in card
    assert info["limitations"]["trained_past"] is None and "trained past" not in card
    assert "Primary metric `macro_f1`, minimum effect +1.0 points." in card  # points, as compare
    failure = {"id": "p/a.1", "expected": {"name": "a"}, "output": '{"name": "b"}'}
    seeded["limitations"]["typical_failures"] = [failure | {"input": "NAME\n\n  a - tool"}]
    listed = body(seeded)  # JSON beside JSON, and one line per failure
    assert '- `p/a.1`: expected `{"name": "a"}`, got `{"name": "b"}`: “NAME a - tool”' in listed
    leave = {"why": "audit", "findings": [{"code": "target_not_in_format", "count": 1}]}
    seeded["limitations"]["trained_past"] = leave
    card = " ".join(body(seeded).split())
    assert (
        f"**Warning:** {info['run']} trained past blocking findings (target_not_in_format: 1 "
        "row(s)) with --allow-warnings: 'audit'." in card
    )


def test_verify_in_a_copied_lab_records_into_the_copy_s_export(exported, tmp_path, capsys):
    """The copy's export record keeps the old absolute path: verify said no export of the lab
    wrote the bundle, and recorded nothing."""
    lab, bundle = exported
    copy = Path(shutil.copytree(lab, tmp_path / "copy"))
    code, result = tl(capsys, "verify", str(copy / bundle.relative_to(lab)))
    assert code == 0 and result["recorded"], result.get("not_recorded")
    record = json.loads((copy / result["recorded"]).read_text())
    assert record["bundle"] == str(bundle) and record["verified"]["passed"] is True


def test_an_export_a_read_only_lab_cannot_record_leaves_no_bundle(exported, tmp_path, monkeypatch):
    """A read-only lab: `export --out ELSEWHERE` refused (exit 2) on the export record and left
    a whole bundle there that no record named."""
    from tunelab.core.lab import open_lab
    from tunelab.core.numbered import NumberedRecords
    from tunelab.stages.export.bundle import export_run

    lab, _ = exported

    def read_only(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self.root / "exports" / ".lock"))

    monkeypatch.setattr(NumberedRecords, "save_new", read_only)
    out = tmp_path / "b4"
    with pytest.raises(PermissionError):
        export_run(open_lab(lab), "r003-lora", out)
    assert not out.exists()
