"""A forgetting guardrail end to end on a tiny causal LM: the text it names is versioned with
the data, every run and the zero-shot baseline are scored on it, and compare judges it: broken
by a planted regression (full fine-tuning at a rate that wrecks the model), holding on a clean
run."""

from __future__ import annotations

import json

from test_cli import tl

from tunelab.core.spec import load_spec

PROSE = [
    "The river rose slowly through the night and by morning the lower fields were under water.",
    "She kept the letters in a tin box under the stairs, tied with string, unread for years.",
    "Markets opened lower on Monday as investors waited for news of the interest rate decision.",
    "The choir sang in the old church every Sunday, and the villagers came to listen.",
    "A small bakery on the corner sold bread before dawn to the workers of the harbour.",
    "The committee agreed to meet again next week after the report had been circulated.",
]


def forgetting_rails(max_drop: float) -> list[dict]:
    return [
        {"metric": "json_valid", "scope": "overall", "max_drop": 1.0},
        {"metric": "bits_per_byte", "on": "general/prose.jsonl", "max_drop": max_drop},
    ]


def test_a_forgetting_guardrail_breaks_on_a_planted_regression_and_holds_on_a_clean_run(
    make_extraction_lab, capsys
):
    lab = make_extraction_lab(guardrails=forgetting_rails(0.05))
    (lab / "general").mkdir()
    rows = [{"id": f"p{i}", "text": " ".join(PROSE[i:] + PROSE[:i])} for i in range(len(PROSE))]
    (lab / "general" / "prose.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    code, report = tl(capsys, "data", "--lab", str(lab))
    assert code == 0
    guard = report["guard_sets"]["general/prose.jsonl"]
    assert guard["documents"] == 6 and guard["file"] == "guard/general_prose.jsonl"
    version = report["version"]
    (lab / "general" / "prose.jsonl").write_text(json.dumps(rows[0]) + "\n")
    code, changed = tl(capsys, "data", "--lab", str(lab))
    assert code == 0 and changed["version"] != version  # the text is part of the version
    (lab / "general" / "prose.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, report = tl(capsys, "data", "--lab", str(lab))
    assert report["version"] == version

    code, base = tl(capsys, "baseline", "--lab", str(lab))
    assert code == 0
    (zero_shot,) = base["runs"]
    scored = zero_shot["guard"]["general/prose.jsonl"]
    assert scored["metrics"]["bits_per_byte"] > 0

    code, _ = tl(capsys, "run", "--lab", str(lab), "--name", "clean", "training.lr=1e-7")
    assert code == 0
    code, wrecked = tl(  # the planted regression: full fine-tuning at a wrecking rate
        capsys,
        "run",
        "--lab",
        str(lab),
        "--name",
        "wrecked",
        "method.type=full",
        "training.lr=0.5",
        "--reason",
        "a planted regression",
    )
    assert code == 0
    rise = (
        wrecked["guard"]["general/prose.jsonl"]["metrics"]["bits_per_byte"]
        - scored["metrics"]["bits_per_byte"]
    )
    assert rise > 0.05, rise

    code, result = tl(capsys, "compare", "--lab", str(lab), "--reason", "lr differs on purpose")
    assert code == 0
    by_name = {r["id"].split("-", 1)[1]: r for r in result["runs"] if r["kind"] == "variant"}
    rails = {r: by_name[r]["guardrails"][1] for r in ("clean", "wrecked")}
    assert rails["clean"]["on"] == "general/prose.jsonl"
    assert rails["clean"]["status"] == "holds"
    assert rails["wrecked"]["status"] == "broken"
    assert by_name["wrecked"]["verdict"] == "guardrail broken"
    assert any("on general/prose.jsonl" in r for r in by_name["wrecked"]["reasons"])
    assert load_spec(lab / "tunelab.yaml").guardrails[1].on == "general/prose.jsonl"

    code, found = tl(capsys, "fsck", "--lab", str(lab))  # the scored documents are hashed
    assert code == 0 and found["passed"]
    scored_file = lab / ".tunelab" / "runs" / wrecked["id"] / "guard" / "general_prose.jsonl"
    scored_file.write_text(scored_file.read_text().replace('"nll": ', '"nll": 1', 1))
    code, found = tl(capsys, "fsck", "--lab", str(lab))
    assert code == 1 and any("general_prose.jsonl" in p["path"] for p in found["problems"])
