"""The extraction lab through the CLI on a tiny causal LM: data, inspect, baseline, run, compare."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

from rich.console import Console
from test_cli import expected_verdict, tl

from conftest import page_rows
from tunelab.cli import main
from tunelab.views import compare as compare_view


def test_the_whole_extraction_lab(make_extraction_lab, capsys):
    lab = str(make_extraction_lab())
    code, report = tl(capsys, "data", "--lab", lab)
    assert code == 0 and report["kept"] == 30

    code, view = tl(capsys, "inspect", "--lab", lab, "--sample", "1")
    # the lab generates 12 tokens (fast tests): the 30-odd-token answers are cut, and said so
    assert code == 0 and [f["code"] for f in view["findings"]] == ["answer_longer_than_generation"]
    assert all(ex["eos_trained"] for ex in view["examples"])

    code, base = tl(capsys, "baseline", "--lab", lab)
    assert code == 0
    (zero_shot,) = base["runs"]
    assert zero_shot["name"] == "zero-shot"
    assert set(zero_shot["metrics"]) >= {"json_valid", "schema_valid", "exact_match", "per_field"}

    code, run = tl(capsys, "run", "--lab", lab, "--name", "lora")
    assert code == 0 and run["status"] == "completed"
    assert run["trainable"]["target_modules"] == {"q_proj": 2, "v_proj": 2}
    assert run["training"]["tokens"] > 0 and "target token" in run["training"]["loss_normalisation"]

    code, result = tl(capsys, "compare", "--lab", lab)
    assert code == 0 and result["task"] == "extraction"
    (variant,) = [r for r in result["runs"] if r["kind"] == "variant"]
    assert set(variant["per_field"]) == {"name", "section", "summary"}
    assert [g["scope"] for g in variant["guardrails"]] == ["overall", "every_field"]
    assert variant["verdict"] == expected_verdict(variant, result["min_effect"])
    every_field = variant["guardrails"][1]
    assert set(every_field["checks"]) == {"name", "section", "summary"}
    assert all(c["low"] <= c["delta"] <= c["high"] for c in every_field["checks"].values())
    # five metrics: the verdict table keeps the primary one (eleven columns cut the run ids to
    # `r001-ze…` in 120), the others get a table of their own
    assert main(["compare", "--lab", lab]) == 0
    shown = capsys.readouterr().out
    assert variant["id"] in shown and "…" not in shown.split("other metrics")[0]
    assert "other metrics" in shown and "schema valid" in shown.split("other metrics")[1]
    # a report that showed every run's metrics already (the extraction demo) leaves them out
    out = io.StringIO()
    compare_view.compare(result, Console(file=out, width=120), metric_tables=False)
    brief = out.getvalue()
    assert variant["id"] in brief and "verdict" in brief
    assert "other metrics" not in brief and "per-field exact" not in brief

    # a plain LoRA of q/v: LoRA-only engines can load it; its merged form verifies alone
    code, exported = tl(capsys, "export", run["id"], "--lab", lab, "--merge", "--gguf", "f32")
    assert code == 0 and exported["serving"]["plain_lora"] is True
    gguf = exported["gguf"]  # the run's tokenizer and template embedded, as trained
    assert gguf["file"] == "gguf/model.gguf" and gguf["architecture"] == "llama"
    assert gguf["tokenizer"]["chat_template"] and gguf["tokenizer"]["eos"] is not None
    assert gguf["llama_cpp"].startswith("not run at export: `tunelab verify` generates")
    import gguf as gguf_package  # the name llama.cpp shows: the run and its base, no tmp path

    fields = gguf_package.GGUFReader(str(Path(exported["bundle"]) / gguf["file"])).fields
    assert fields["general.name"].contents() == f"{run['id']} (tiny-llama, fine-tuned by tunelab)"
    card = " ".join((Path(exported["bundle"]) / "README.md").read_text().split())
    assert "`gguf/model.gguf`: the LoRA merged into the base as one GGUF file" in card
    assert "(llama, f32, " in card and "its chat template, BOS and EOS embedded" in card
    # the decoding its numbers hold for, in the card and in template.json alike
    decoding = json.loads((Path(exported["bundle"]) / "template.json").read_text())["decoding"]
    assert decoding["strategy"] == "greedy" and decoding["max_new_tokens"] == 12
    stops = decoding["stop_token_ids"]
    assert f"greedy decoding (no sampling), at most 12 new tokens, stopping at {stops}" in card
    code, verified = tl(capsys, "verify", exported["bundle"])
    items = {i["name"]: i for i in verified["items"]}
    merged = items["merged"]
    assert code == 0 and merged["passed"], merged
    assert "AutoModelForCausalLM alone" in merged["detail"] and merged["exact"]
    read_back = items["gguf"]  # f32: every answer reproduced from the file
    assert read_back["agreed"] == read_back["n"], read_back
    assert "chat template, BOS and EOS as trained" in read_back["detail"]
    # llama.cpp's own check runs where it is built (tests/e2e/test_cli_gguf_llama_cpp.py);
    # where not, the item is not checked, never passed, and the verdict says so
    llama_cpp = importlib.util.find_spec("llama_cpp") is not None
    assert ("llama.cpp: not checked" in read_back["detail"]) is not llama_cpp
    assert read_back["passed"] is (True if llama_cpp else None)  # not checked: null, no pass
    assert bool(read_back.get("not_checked")) is not llama_cpp
    assert verified["passed"] and bool(verified["not_checked"]) is not llama_cpp


def test_format_lab_checks_answers_against_a_regex(make_extraction_lab, capsys):
    rows = [
        {"text": f"What is {i} plus {i}?", "target": f"ANSWER: {2 * i}", "label": "sum"}
        for i in range(30)
    ]
    lab = str(
        make_extraction_lab(
            rows,
            task={"type": "format", "regex": r"ANSWER: \d+", "instruction": "Add."},
            hypothesis={"behaviour": "format", "metric": "format_valid", "min_effect": 0.1},
            guardrails=[{"metric": "exact_match", "scope": "overall", "max_drop": 0.0}],
        )
    )
    assert tl(capsys, "data", "--lab", lab)[0] == 0
    code, base = tl(capsys, "baseline", "--lab", lab)
    assert code == 0 and set(base["runs"][0]["metrics"]) == {"format_valid", "exact_match", "n"}
    assert tl(capsys, "run", "--lab", lab)[0] == 0
    code, result = tl(capsys, "compare", "--lab", lab)
    assert code == 0 and result["task"] == "format" and result["groups"] is None

    # answers longer than generation can take: `inspect` said so, and now run and compare do
    short = ["evaluation.max_new_tokens=2", "--reason", "too short on purpose"]
    assert main(["run", "--lab", lab, "--name", "short", *short]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert "warning (inspect) answers longer than evaluation.max_new_tokens (2)" in said
    code, result = tl(capsys, "compare", "--lab", lab)
    (row,) = [r for r in result["runs"] if r["id"].endswith("-short")]
    assert any("they can never be right" in w for w in row["warnings"]), row["warnings"]


def test_classification_with_a_causal_lm_scores_labels(make_lab, tiny_llama, capsys):
    lab = str(
        make_lab(
            model={"path": str(tiny_llama), "kind": "causal", "template": "chat", "max_length": 64},
            method={"type": "lora", "r": 4, "target_modules": ["q_proj", "v_proj"]},
        )
    )
    assert tl(capsys, "data", "--lab", lab)[0] == 0
    code, base = tl(capsys, "baseline", "--lab", lab)
    assert code == 0 and base["runs"][0]["name"] == "zero-shot"
    assert base["runs"][0]["metrics"]["n"] == 12 and "macro_f1" in base["runs"][0]["metrics"]
    code, run = tl(capsys, "run", "--lab", lab)
    assert code == 0 and run["status"] == "completed"
    predictions = (tl(capsys, "compare", "--lab", lab))[1]["runs"]
    assert {r["kind"] for r in predictions} == {"baseline", "variant"}


def test_targets_scoring_cannot_read_or_the_schema_refuses_stop_before_any_model(
    make_extraction_lab, capsys
):
    rows = page_rows()
    for row in rows[::3]:
        del row["target"]["section"]  # a required field: scoring would stop on these
    lab = make_extraction_lab(rows)
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0
    for command in ("baseline", "check", "run"):
        code, out = tl(capsys, command, "--lab", str(lab))
        assert code == 2, (command, out)
        assert "validation row(s) have a target that scoring cannot read" in out["error"]
        assert "lacks the required field(s) section (task.required)" in out["error"]
    runs = lab / ".tunelab" / "runs"
    assert not runs.exists() or not any(runs.iterdir())  # nothing generated, nothing trained

    rows = page_rows()
    rows[1]["target"]["section"] = 3  # scorable, but the schema wants a string
    lab = make_extraction_lab(rows)
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0
    code, view = tl(capsys, "inspect", "--lab", str(lab), "--sample", "0")
    (found,) = [f for f in view["findings"] if f["code"] == "target_not_in_format"]
    assert found["blocking"] and found["count"] == 1
    assert "3 is not of type 'string'" in found["message"]
    code, out = tl(capsys, "run", "--lab", str(lab))
    assert code == 2 and "target_not_in_format (1 row(s), e.g. pages.jsonl:2)" in out["error"]

    for row in rows[::3]:  # validation rows too: a perfect answer would be counted invalid
        row["target"]["section"] = 3
    lab = make_extraction_lab(rows)
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0
    code, out = tl(capsys, "baseline", "--lab", str(lab))
    assert (
        code == 2
        and "validation row(s) have a target that task.json_schema refuses" in (out["error"])
    )
    assert "3 is not of type 'string'" in out["error"] and not (lab / ".tunelab" / "runs").exists()
