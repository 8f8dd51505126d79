"""Conversation labs through the CLI on a tiny causal LM: `messages` rows of several turns and
prompt/completion rows are versioned, inspected turn by turn (the loss on the assistant's
answers alone), trained, and evaluated by generating the last assistant turn."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from test_cli import tl

from conftest import extraction_spec, page_rows
from tunelab.cli import main
from tunelab.core.store import read_jsonl

SYSTEM = "You index manual pages."


def chats(n: int = 30) -> list[dict]:
    rows = []
    for i, page in enumerate(page_rows(n)):
        split = "train" if i < 18 else "validation" if i < 24 else "test"
        system = SYSTEM if split == "train" else "You are a terse indexer."
        rows.append(
            {
                "id": f"c{i}",
                "split": split,
                "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": "What is a manual page?"},
                    {"role": "assistant", "content": "A page of documentation."},
                    {"role": "user", "content": "Index this page:\n\n" + page["text"]},
                    {"role": "assistant", "content": json.dumps(page["target"])},
                ],
            }
        )
    return rows


def write_lab(tmp_path, tiny_llama, rows: list[dict], **data) -> str:
    lab = tmp_path / "chat-lab"
    lab.mkdir()
    (lab / "chats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = extraction_spec(tiny_llama)
    spec["data"] = {"sources": [{"type": "jsonl", "path": "chats.jsonl"}], **data}
    spec["model"]["max_length"] = 256
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(spec))
    return str(lab)


def test_a_multi_turn_lab_trains_on_its_answers_and_evaluates_its_last_turn(
    tmp_path, tiny_llama, capsys
):
    rows = [*chats(), {"id": "open", "split": "train", "messages": chats(1)[0]["messages"][:4]}]
    lab = write_lab(
        tmp_path, tiny_llama, rows, fields={"id": "id", "messages": "messages", "split": "split"}
    )
    code, data = tl(capsys, "data", "--lab", lab)
    assert (
        code == 0 and data["kept"] == 30 and data["quarantine"]["reasons"] == {"no_final_answer": 1}
    )
    assert data["conversations"]["turns"] == {"min": 5, "p50": 5, "max": 5}

    code, view = tl(capsys, "inspect", "--lab", lab, "--sample", "1")
    assert code == 0
    (example,) = view["examples"]
    assert [t["role"] for t in example["turns"]] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    trained = [t["loss_tokens"] > 0 for t in example["turns"]]
    assert trained == [False, False, True, False, True] and example["eos_trained"]
    codes = {f["code"]: f for f in view["findings"]}
    assert not any(f["blocking"] for f in view["findings"])
    assert codes["system_prompt_differs"]["count"] == 6  # validation's system prompt
    earlier = codes["earlier_answer_not_in_format"]  # "A page of documentation." trains too
    assert not earlier["blocking"] and earlier["count"] == 18
    said = (
        "(e.g. c0 (chats.jsonl:1), turn 2: not a JSON object (not JSON: Expecting value at char 0))"
    )
    assert said in earlier["message"]
    code, last = tl(capsys, "inspect", "--lab", lab, "--sample", "0", "model.loss_on_turns=last")
    assert "earlier_answer_not_in_format" not in {f["code"] for f in last["findings"]}
    code, cut = tl(capsys, "inspect", "--lab", lab, "--sample", "0", "model.max_length=160")
    assert cut["summary"]["turns_dropped"] == 32  # 16 of the 18 rows lose their first exchange
    earlier = next(f for f in cut["findings"] if f["code"] == "earlier_answer_not_in_format")
    assert earlier["count"] == 2  # what was dropped teaches nothing
    assert "instruction_unused" not in codes  # the task's default: nothing was asked of it
    code, view = tl(capsys, "inspect", "--lab", lab, "--sample", "0", "task.instruction=Be brief.")
    (unused,) = [f for f in view["findings"] if f["code"] == "instruction_unused"]
    assert (
        not unused["blocking"] and "task.instruction ('Be brief.') is not used" in unused["message"]
    )

    code, _ = tl(capsys, "baseline", "--lab", lab)
    assert code == 0
    code, run = tl(capsys, "run", "--lab", lab, "--name", "lora")
    assert code == 0 and run["status"] == "completed", run
    predictions = [
        json.loads(line)
        for line in (
            tmp_path / "chat-lab" / ".tunelab" / "runs" / run["id"] / "predictions.jsonl"
        ).open()
    ]
    answers = {r["id"]: json.loads(r["messages"][-1]["content"]) for r in chats()}
    assert len(predictions) == 6
    assert all(p["target"] == answers[p["id"]] for p in predictions)  # scored on the last turn
    code, result = tl(capsys, "compare", "--lab", lab)
    assert code == 0 and result["task"] == "extraction"

    # the handover names the chat template's recipe, not a prompt the lab never filled
    code, exported = tl(capsys, "export", run["id"], "--lab", lab)
    assert code == 0
    bundle = Path(exported["bundle"])
    template = json.loads((bundle / "template.json").read_text())
    assert template["conversation"] and "prompt" not in template
    card = (bundle / "README.md").read_text()
    assert "the conversation's turns before the answer, rendered by the bundle's chat" in card
    assert "template.json's `prompt`" not in card
    assert "chat_template.jinja" in exported["files"]
    code, verified = tl(capsys, "verify", str(bundle))
    assert code == 0 and verified["passed"]


def test_prompt_completion_rows_train_and_evaluate_the_completion(tmp_path, tiny_llama, capsys):
    rows = [{"q": page["text"], "a": json.dumps(page["target"])} for page in page_rows(30)]
    lab = write_lab(
        tmp_path,
        tiny_llama,
        rows,
        fields={"prompt": "q", "completion": "a"},
        split={"train": 0.6, "validation": 0.2, "test": 0.2, "seed": 0},
    )
    code, data = tl(capsys, "data", "--lab", lab)
    assert code == 0 and data["kept"] == 30
    code, view = tl(capsys, "inspect", "--lab", lab, "--sample", "1")
    assert [t["role"] for t in view["examples"][0]["turns"]] == ["user", "assistant"]
    code, run = tl(capsys, "run", "--lab", lab, "--name", "lora")
    assert code == 0 and run["metrics"]["n"] == 6


def test_sharegpt_rows_make_the_version_their_role_content_copy_makes(tmp_path, tiny_llama, capsys):
    fields = {"id": "id", "messages": "messages", "split": "split"}
    rows = chats()
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    lab = write_lab(tmp_path / "a", tiny_llama, rows, fields=fields)
    names = {"user": "human", "assistant": "gpt"}
    shared = [
        {
            **r,
            "messages": [
                {"from": names.get(t["role"], t["role"]), "value": t["content"]}
                for t in r["messages"]
            ],
        }
        for r in rows
    ]
    other = write_lab(tmp_path / "b", tiny_llama, shared, fields=fields)
    code, plain = tl(capsys, "data", "--lab", lab)
    assert code == 0 and plain["conversations"]["sharegpt_rows"] == 0
    assert plain["conversations"]["content_parts_rows"] == 0
    code, data = tl(capsys, "data", "--lab", other)
    assert code == 0 and data["kept"] == 30 and data["conversations"]["sharegpt_rows"] == 30
    kept = [
        [r["messages"] for r in read_jsonl(Path(lab_) / ".tunelab/data" / v / "train.jsonl")]
        for lab_, v in ((lab, plain["version"]), (other, data["version"]))
    ]
    assert kept[0] == kept[1]  # the same turns kept, as role and content


def test_text_parts_rows_are_counted_in_the_data_report(tmp_path, tiny_llama, capsys):
    rows = chats()
    for r in rows[:5]:  # the chat APIs' form: a list of text parts
        r["messages"][3]["content"] = [{"type": "text", "text": r["messages"][3]["content"]}]
    fields = {"id": "id", "messages": "messages", "split": "split"}
    lab = write_lab(tmp_path, tiny_llama, rows, fields=fields)
    code, data = tl(capsys, "data", "--lab", lab)
    assert code == 0 and data["kept"] == 30 and data["conversations"]["content_parts_rows"] == 5


def test_openai_rows_weighing_an_answer_0_train_on_the_others(tmp_path, tiny_llama, capsys):
    rows = chats()
    for r in rows:  # OpenAI's fine-tuning format: the earlier answer kept, its loss off
        r["messages"][2]["weight"] = 0
        r["messages"][4]["weight"] = 1
    fields = {"id": "id", "messages": "messages", "split": "split"}
    lab = write_lab(tmp_path, tiny_llama, rows, fields=fields)
    code, data = tl(capsys, "data", "--lab", lab)
    assert code == 0 and data["kept"] == 30 and data["conversations"]["answers_weighted_0"] == 30
    code, view = tl(capsys, "inspect", "--lab", lab, "--sample", "1")
    assert code == 0 and not any(f["blocking"] for f in view["findings"])
    (example,) = view["examples"]
    assert [t["loss_tokens"] > 0 for t in example["turns"]] == [False] * 4 + [True]
    assert [t.get("weight") for t in example["turns"]] == [None, None, 0, None, None]
    assert main(["data", "--lab", lab]) == 0
    assert "30 assistant answers have weight 0" in capsys.readouterr().out
    assert main(["inspect", "--lab", lab, "--sample", "1"]) == 0
    assert " · assistant 28 (weight 0) · " in capsys.readouterr().out


def test_a_lab_whose_rows_carry_no_loss_fails_its_check_at_render(tmp_path, tiny_llama, capsys):
    rows = chats()
    for r in rows:  # only the last answer trains (loss_on_turns: last), and it weighs 0
        r["messages"][4]["weight"] = 0
    fields = {"id": "id", "messages": "messages", "split": "split"}
    lab = write_lab(tmp_path, tiny_llama, rows, fields=fields)
    assert tl(capsys, "data", "--lab", lab)[0] == 0
    code, check = tl(capsys, "check", "--lab", lab, "model.loss_on_turns=last")
    assert code == 1 and check["failed"][0] == "render", check["failed"]
    render = next(i for i in check["items"] if i["name"] == "render")
    assert render["no_loss"] == 16 and "16 carry no loss token (e.g. c" in render["detail"]
    code, view = tl(capsys, "inspect", "--lab", lab, "--sample", "1", "model.loss_on_turns=last")
    assert {f["code"] for f in view["findings"] if f["blocking"]} == {"empty_loss_mask"}
    assert not any(ex["eos_trained"] for ex in view["examples"])  # nothing trained, no end


def test_one_system_prompt_for_all_makes_no_duplicates_and_one_prompt_two_answers_conflict(
    tmp_path, tiny_llama, capsys
):
    import random

    rng = random.Random(0)
    words = [
        "river",
        "stone",
        "cloud",
        "lamp",
        "violin",
        "harbor",
        "pepper",
        "engine",
        "marble",
        "falcon",
        "quilt",
        "cedar",
    ]
    system = " ".join(rng.choice(words) + str(i) for i in range(60))  # one long rule book
    rows = []
    for i in range(40):  # short questions, each its own
        question = " ".join(rng.choice(words) + str(rng.randrange(1000)) for _ in range(8))
        turns = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        answer = {"role": "assistant", "content": json.dumps({"n": i})}
        rows.append({"id": f"q{i}", "messages": [*turns, answer]})
    asked = rows[0]["messages"][:-1]  # the same prompt again, answered otherwise
    rows.append(
        {"id": "again", "messages": [*asked, {"role": "assistant", "content": '{"n": 99}'}]}
    )
    split = {"train": 0.7, "validation": 0.15, "test": 0.15, "seed": 0}
    lab = write_lab(
        tmp_path, tiny_llama, rows, fields={"id": "id", "messages": "messages"}, split=split
    )
    code, data = tl(capsys, "data", "--lab", lab)
    assert code == 0, data
    assert data["quarantine"]["reasons"] == {"label_conflict": 2}, data["quarantine"]
    assert data["kept"] == 39  # every other conversation, none taken for a near copy
    assert data["duplicates"]["pairs_total"] == 0, data["duplicates"]
    quarantined = read_jsonl(Path(lab) / ".tunelab/data" / data["version"] / "quarantine.jsonl")
    assert all("the same prompt (the turns before the answer)" in q["reason"] for q in quarantined)


STRICT_TEMPLATE = (  # a Gemma-like template: prints no system turn
    "{% for message in messages %}{% if message['role'] == 'system' %}"
    "{% elif message['role'] in ('user', 'assistant') %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}"
)


def test_a_template_that_cannot_print_a_validation_turn_is_refused_before_a_model_loads(
    tmp_path, tiny_llama, capsys
):
    import shutil

    strict = tmp_path / "strict-llama"
    shutil.copytree(tiny_llama, strict)
    (strict / "chat_template.jinja").write_text(STRICT_TEMPLATE)
    fields = {"id": "id", "messages": "messages", "split": "split"}
    lab = write_lab(tmp_path, strict, chats(), fields=fields)
    assert tl(capsys, "data", "--lab", lab)[0] == 0
    for command in (["baseline"], ["run", "--allow-warnings", "trying"]):
        code, out = tl(capsys, *command, "--lab", lab)
        assert code == 2, out
        assert out["error"].startswith("6 validation conversation(s) cannot be rendered by")
        assert "c18 (chats.jsonl:19): turn 0's role 'system': the chat template" in out["error"]
    assert not (Path(lab) / ".tunelab" / "runs").exists() or not any(
        (Path(lab) / ".tunelab" / "runs").iterdir()
    )  # refused before a record opened
    assert "Map their roles" in out["error"]


def test_a_validation_conversation_too_long_to_render_is_told_about_its_length_alone(
    tmp_path, tiny_llama, capsys
):
    fields = {"id": "id", "messages": "messages", "split": "split"}
    lab = write_lab(tmp_path, tiny_llama, chats(), fields=fields)
    assert tl(capsys, "data", "--lab", lab)[0] == 0
    code, out = tl(capsys, "baseline", "--lab", lab, "model.max_length=8")
    assert code == 2 and "more than model.max_length=8: raise it" in out["error"], out
    assert (
        "conversation(s) do not fit model.max_length, so they cannot be evaluated" in (out["error"])
    )
    assert "roles" not in out["error"] and "template" not in out["error"]  # another refusal's
