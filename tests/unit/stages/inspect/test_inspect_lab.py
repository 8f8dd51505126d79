"""Each inspect finding fires on a lab built to trigger it, and not on a clean one."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from conftest import page_rows, topic_rows
from tunelab.core.allowed import past_words, trained_past
from tunelab.core.lab import open_lab
from tunelab.data import build_data
from tunelab.modeling.render import Rendered
from tunelab.stages.compare.notes import pair_warnings as compare_warnings
from tunelab.stages.inspect.lab import causal_view, inspect_lab
from tunelab.stages.run.variant import BlockedError, run_variant
from tunelab.views import inspect as inspect_view


def prepared(lab_path: Path, **overrides):
    lab = open_lab(lab_path, overrides)
    build_data(lab.spec, lab.path, lab.store)
    return lab


def codes(result: dict) -> dict[str, bool]:
    return {f["code"]: f["blocking"] for f in result["findings"]}


def tokenizer_variant(tiny_llama: Path, tmp_path: Path, **config) -> Path:
    """A copy of the tiny llama whose tokenizer config is changed (e.g. no EOS)."""
    out = tmp_path / "variant-llama"
    shutil.copytree(tiny_llama, out)
    path = out / "tokenizer_config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | config))
    if config.get("chat_template", "keep") is None:
        (out / "chat_template.jinja").unlink()
    return out


WHOLE = {"evaluation.max_new_tokens": 48}
"""Room for the tiny pages' longest answer (36 tokens): the fixture's 12 keeps generation in
other tests short, and `answer_longer_than_generation` says so."""


def test_clean_generative_lab_has_no_findings(make_extraction_lab):
    result = inspect_lab(prepared(make_extraction_lab(), **WHOLE))
    assert result["findings"] == []
    ex = result["examples"][0]
    assert ex["eos_trained"] and not ex["text_cut"]
    loss_text = "".join(t["text"] for t in ex["tokens"] if t["loss"])
    assert loss_text == ex["target"] + "<|im_end|>"
    assert result["summary"]["pad_is_end_token"]  # the trap, handled by position masking


def test_target_that_cannot_fit_blocks_training_until_a_reason_is_given(make_extraction_lab):
    rows = page_rows()
    for row in rows[:10]:  # some of them land in train
        row["target"]["summary"] = "a summary far too long to fit " * 12
    lab = prepared(make_extraction_lab(rows))
    found = {f["code"]: f for f in inspect_lab(lab)["findings"]}
    assert found["target_truncated"]["blocking"]
    assert len(found["target_truncated"]["rows"]) == found["target_truncated"]["count"] > 1
    with pytest.raises(BlockedError, match="target_truncated"):
        run_variant(lab)
    assert not (lab.store.runs_dir).exists()
    record = run_variant(lab, allow_warnings="checking the refusal")
    assert record["warnings_allowed"] == "checking the refusal"
    assert record["rejected_train"]
    assert all("rows" not in f for f in record["findings"])  # counted; the ids are inspect's
    # the leave goes on with the run: compare, the card and the run's view say it
    past = trained_past(record)
    assert [f["code"] for f in past["findings"]] == ["target_truncated"]
    assert past_words(record["id"], past).startswith(
        f"{record['id']} trained past blocking findings (target_truncated: "
    )
    before = {"id": "r001-zero-shot", "kind": "baseline"}
    warned = compare_warnings(before, record, {"concentration": {"concentrated": False}})
    assert past_words(record["id"], past) in warned


def test_missing_eos_is_blocking(make_extraction_lab, tiny_llama, tmp_path):
    model = tokenizer_variant(tiny_llama, tmp_path, eos_token=None)
    lab = prepared(make_extraction_lab(), **{"model.path": str(model), "model.template": "plain"})
    assert codes(inspect_lab(lab))["eos_not_trained"] is True


def test_loss_on_prompt_is_reported(make_extraction_lab):
    lab = prepared(make_extraction_lab(), **{"model.loss_on_prompt": True})
    assert codes(inspect_lab(lab))["loss_on_prompt"] is True


def test_chat_template_missing_and_ignored(make_extraction_lab, tiny_llama, tmp_path):
    bare = tokenizer_variant(tiny_llama, tmp_path, chat_template=None)
    lab = prepared(make_extraction_lab(), **{"model.path": str(bare)})
    view = inspect_lab(lab)
    assert codes(view) == {"chat_template_missing": True}
    out = io.StringIO()
    inspect_view.inspect(view, Console(file=out, width=200))
    assert out.getvalue().rstrip().endswith("ships one (18 rows)")  # no example named
    plain = prepared(make_extraction_lab(), **{"model.template": "plain"}, **WHOLE)
    assert codes(inspect_lab(plain)) == {"chat_template_ignored": False}


def test_answers_longer_than_generation_are_found(make_extraction_lab):
    """The fixture's evaluation.max_new_tokens (12) cuts every answer of the tiny pages: their
    generations can never be right, whatever the model learns."""
    result = inspect_lab(prepared(make_extraction_lab()))
    found = next(f for f in result["findings"] if f["code"] == "answer_longer_than_generation")
    assert not found["blocking"] and found["count"] == result["rows"]
    assert (
        "the longest is 36 tokens: set evaluation.max_new_tokens to 36 or more"
        in (found["message"])
    )
    assert codes(inspect_lab(prepared(make_extraction_lab(), **WHOLE))) == {}


def test_heavy_class_imbalance_warns(make_lab):
    rows = topic_rows(n_per_label=40)
    rows = [r for r in rows if r["label"] != "tech"] + [r for r in rows if r["label"] == "tech"][:3]
    lab = prepared(
        make_lab(
            rows,
            data={
                "sources": [{"type": "jsonl", "path": "docs.jsonl"}],
                "split": {"train": 0.8, "validation": 0.1, "test": 0.1},
            },
        )
    )
    result = inspect_lab(lab)
    assert codes(result)["class_imbalance"] is False
    clean = inspect_lab(prepared(make_lab()))
    assert "class_imbalance" not in codes(clean)
    assert {e["category"] for e in clean["examples"]} == {"business", "sport", "tech"}


def test_a_row_with_no_loss_token_is_flagged(make_extraction_lab):
    lab = prepared(make_extraction_lab())
    from tunelab.modeling.model import load_tokenizer
    from tunelab.modeling.render import make_renderer

    renderer = make_renderer(lab.spec, load_tokenizer(lab.spec.model, lab.path), [], lab.path)
    rendered = renderer.render({"id": "x", "text": "t", "target": {}, "label": ""})
    hollow = Rendered(
        "x", rendered.input_ids, [0] * len(rendered.input_ids), rendered.prompt_len, 0, {}, "", ""
    )
    renderer.render = lambda row, with_target=True: hollow  # a renderer gone wrong
    findings = causal_view(renderer, [{"id": "x"}], [], sample=0)[1]
    assert {f["code"] for f in findings} >= {"empty_loss_mask", "eos_not_trained"}


def test_many_categories_show_at_most_shown_examples_unless_asked(make_lab):
    """Two examples of each of 77 intents was 959 lines: by default at most SHOWN examples, and
    the view says how many categories they cover; `--sample N` shows N of every category."""
    from tunelab.stages.inspect.lab import SHOWN

    labels = [f"intent{i:02d}" for i in range(SHOWN + 6)]
    rows = [
        {"text": f"a note {i} about {label}", "label": label} for label in labels for i in range(6)
    ]
    lab = prepared(make_lab(rows))
    capped = inspect_lab(lab)
    shown = capped["summary"]["shown"]
    assert len(capped["examples"]) == shown["examples"] == SHOWN
    assert shown["categories"] == len(labels) and shown["of_categories"] < len(labels)
    out = Console(file=io.StringIO(), width=200)
    inspect_view.inspect(capped, out)
    assert (
        f"of {len(labels)} categories shown (`--sample 1` shows one of each)" in out.file.getvalue()
    )
    asked = inspect_lab(lab, sample=1)
    assert {e["category"] for e in asked["examples"]} == set(labels)
    none = inspect_lab(lab, sample=0)  # the findings alone, said so (it read "0 examples of
    out = Console(file=io.StringIO(), width=200)  # the first 0 of 22 categories shown")
    inspect_view.inspect(none, out)
    said = out.file.getvalue()
    assert "no examples shown (`--sample 0`)" in said and "of the first" not in said


def test_a_classifier_example_says_where_its_loss_is_and_how_long_it_was(make_lab):
    """It read '128 tokens, 0 carry the loss ... truncated (475)' for a classifier, whose loss
    is its head's and whose 475 was the length before the cut."""
    lab = prepared(make_lab(), **{"model.max_length": 8})
    out = Console(file=io.StringIO(), width=300)
    inspect_view.inspect(inspect_lab(lab, sample=1), out)
    text = out.file.getvalue()
    assert "8 tokens, loss: the class head, on the label, cut from " in text
    assert "carry the loss" not in text and "truncated (" not in text


def test_text_that_spells_a_special_token_is_found_in_answers_and_prompts(make_extraction_lab):
    rows = page_rows()
    rows[0]["target"]["summary"] = "see <|im_end|> below"  # the end of the answer, mid-way
    rows[1]["text"] += "\n<|im_start|>assistant\nforged"  # a turn the row does not have
    result = inspect_lab(prepared(make_extraction_lab(rows), **WHOLE))
    out = io.StringIO()
    result["examples"][0]["target"] = "Label: [yes]\nReason: ok."  # a format lab's answer
    inspect_view.inspect(result, Console(file=out, width=300))
    assert "expected: Label: [yes]↵Reason: ok." in out.getvalue()  # one line, markup as text
    found = {f["code"]: f for f in result["findings"]}
    answer, prompt = found["special_token_in_answer"], found["special_token_in_prompt"]
    assert answer["blocking"] and answer["count"] == 1 and "'<|im_end|>'" in answer["message"]
    assert answer["rows"] == [answer["example"]]  # every row it counts, to fix them all
    assert not prompt["blocking"] and prompt["count"] == 1
    assert "'<|im_start|>'" in prompt["message"] and "the prompt" in prompt["message"]


def test_a_conversation_s_turns_count_as_trained_where_they_carry_the_loss():
    from types import SimpleNamespace

    from tunelab.stages.inspect.special import _texts

    turns = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a1"},
        {"role": "assistant", "content": "a2", "weight": 0},
        {"role": "assistant", "content": "a3"},
    ]
    every = SimpleNamespace(last_turn_only=False)
    assert [t[0] for t in _texts(every, {"messages": turns})] == [False, True, False, True]
    last = SimpleNamespace(last_turn_only=True)
    assert [t[0] for t in _texts(last, {"messages": turns})] == [False, False, False, True]


def test_a_finding_says_whether_json_lists_every_row_it_counts():
    def said(count: int, rows: int) -> str:
        out = io.StringIO()
        found = {"code": "input_truncated", "blocking": False, "count": count, "example": "r1"}
        found |= {"message": "cut", "rows": [f"r{i}" for i in range(rows)]}
        inspect_view._findings([found], Console(file=out, width=300))
        return out.getvalue()

    assert "(3 rows, e.g. r1, every one in --json)" in said(3, 3)
    assert "(1441 rows, e.g. r1, the first 1,000 in --json)" in said(1441, 1000)
