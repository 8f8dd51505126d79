"""The extraction lab through the CLI on a tiny causal LM: data, inspect, baseline, run, compare."""

from __future__ import annotations

from test_cli import tl


def test_the_whole_extraction_lab(make_extraction_lab, capsys):
    lab = str(make_extraction_lab())
    code, report = tl(capsys, "data", "--lab", lab)
    assert code == 0 and report["kept"] == 30

    code, view = tl(capsys, "inspect", "--lab", lab, "--sample", "1")
    assert code == 0 and view["findings"] == []
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
    assert variant["verdict"] in {"improved", "no evidence", "guardrail broken"}
