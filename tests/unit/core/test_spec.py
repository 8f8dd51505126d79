import re
from pathlib import Path

import pytest
import yaml

from tunelab.core.spec import (
    SpecError,
    apply_overrides,
    load_spec,
    origin_of,
    parse_overrides,
    validate_spec,
)
from tunelab.core.spec_yaml import load_yaml

MINIMAL = {"data": {"sources": [{"type": "jsonl", "path": "d.jsonl"}]}, "model": {"path": "m"}}


def write(tmp_path: Path, raw: dict) -> Path:
    path = tmp_path / "tunelab.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_minimal_spec_gets_defaults():
    spec = validate_spec(MINIMAL)
    assert spec.method.type == "lora"
    assert spec.training.accumulation == spec.training.global_batch // spec.training.microbatch


def test_error_names_file_line_and_field(tmp_path):
    raw = {**MINIMAL, "training": {"lr": -1.0, "global_batch": 16, "microbatch": 8}}
    path = write(tmp_path, raw)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    text = str(err.value)
    lr_line = path.read_text().splitlines().index("  lr: -1.0") + 1
    assert str(path) in text
    assert f"line {lr_line}, field `training.lr`" in text
    assert "greater than 0" in text


def test_unknown_field_and_batch_divisibility_are_reported(tmp_path):
    raw = {**MINIMAL, "training": {"global_batch": 10, "microbatch": 4, "lr_typo": 1}}
    with pytest.raises(SpecError) as err:
        load_spec(write(tmp_path, raw))
    assert "training.lr_typo" in str(err.value)


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ({"training": {"lrr": 1e-3}}, "did you mean `training.lr`?"),
        ({"training": {"budget": {"stepz": 3}}}, "did you mean `training.budget.steps`?"),
        ({"method": {"type": "lora", "rr": 4}}, "did you mean `method.r`?"),  # under a union
        ({"task": {"type": "format", "regx": "x+"}}, "did you mean `task.regex`?"),
        ({"task": {"type": "multilabel", "seperator": "|"}}, "did you mean `task.separator`?"),
        ({"data": {"sources": [{"type": "jsonl", "pth": "d"}]}}, "`data.sources.0.path`?"),
        ({"evaluation": {"zzzz": 1}}, "evaluation takes: batch_size, max_new_tokens, split"),
        ({"trainng": {"lr": 1e-3}}, "did you mean `training`?"),
        # transformers' and PEFT's names for a field, by tunelab's in the same section
        ({"training": {"learning_rate": 1e-3}}, "tunelab calls it `training.lr`"),
        ({"training": {"num_train_epochs": 2}}, "tunelab calls it `training.budget.epochs`"),
        ({"method": {"type": "lora", "lora_alpha": 8}}, "tunelab calls it `method.alpha`"),
        ({"model": {"path": "m", "model_name_or_path": "m"}}, "tunelab calls it `model.path`"),
        # a field of another member of the union is said to be that member's, not suggested back
        (
            {"method": {"type": "full", "dropout": 0.1}},
            "`method.dropout` is a setting of `method.type: lora`, and this spec has "
            "`method.type: full`",
        ),
        (
            {"task": {"type": "classification", "json_schema": {}}},
            "`task.json_schema` is a setting of `task.type: extraction` or `task.type: format`",
        ),
        ({"method": {"type": "full", "rr": 4}}, "method takes: head_init, type"),  # full's own
    ],
)
def test_an_unknown_field_names_the_one_it_most_likely_meant(raw, said):
    with pytest.raises(SpecError) as err:
        validate_spec({**MINIMAL, **raw})
    assert said in str(err.value) and "Extra inputs are not permitted" in str(err.value)


def test_batch_must_divide(tmp_path):
    raw = {**MINIMAL, "training": {"global_batch": 10, "microbatch": 4}}
    with pytest.raises(SpecError, match="multiple of microbatch"):
        load_spec(write(tmp_path, raw))


def test_unknown_metric_lists_known_ones():
    raw = {**MINIMAL, "hypothesis": {"behaviour": "b", "metric": "bleu", "min_effect": 0.1}}
    with pytest.raises(SpecError, match="macro_f1"):
        validate_spec(raw)


def test_overrides_parse_yaml_values_and_reset_on_type_change():
    raw = {**MINIMAL, "method": {"type": "lora", "r": 8}}
    overrides = parse_overrides(["training.lr=1e-4", "method.type=full", "model.max_length=64"])
    spec = validate_spec(apply_overrides(raw, overrides))
    assert spec.training.lr == pytest.approx(1e-4)
    assert spec.method.type == "full"
    assert spec.model.max_length == 64
    assert raw["method"]["r"] == 8  # the raw spec is not modified


def test_a_type_change_keeps_the_options_the_new_type_shares():
    """LoRA against full fine-tuning is one change: the head still starts from the probe. It
    started at random, since the whole method section was reset."""
    raw = {**MINIMAL, "method": {"type": "lora", "r": 4, "head_init": "probe"}}
    method = apply_overrides(raw, {"method.type": "full"})["method"]
    assert method == {"type": "full", "head_init": "probe"}
    task = {"type": "format", "regex": "A: .+"}
    assert apply_overrides({"task": task}, {"task.type": "extraction"})["task"] == {
        "type": "extraction"
    }
    unknown = apply_overrides(raw, {"method.type": "qlora"})["method"]
    assert unknown == {"type": "qlora"}  # validation names the type it does not know
    source = {"type": "csv", "path": "d.tsv", "name": "docs"}  # a type, not a section's kind
    raw = {**MINIMAL, "data": {"sources": [source]}}
    changed = apply_overrides(raw, {"data.sources.0.type": "tsv"})["data"]["sources"][0]
    assert changed == {"type": "tsv", "path": "d.tsv", "name": "docs"}  # its path was dropped


def test_a_budget_override_replaces_the_file_s_unit():
    raw = {**MINIMAL, "training": {"budget": {"epochs": 1}, "lr": 1e-3}}
    spec = validate_spec(apply_overrides(raw, {"training.budget.steps": 20}))
    assert (spec.training.budget.steps, spec.training.budget.epochs) == (20, None)
    spec = validate_spec(apply_overrides(raw, {"training.budget.epochs": 2}))
    assert (spec.training.budget.steps, spec.training.budget.epochs) == (None, 2)
    assert raw["training"]["budget"] == {"epochs": 1}
    # two units on the command line are still two (refused below, naming both)


def test_bad_override_is_refused():
    with pytest.raises(SpecError, match="key=value"):
        parse_overrides(["training.lr"])


def test_training_refuses_without_hypothesis_or_guardrail():
    spec = validate_spec(MINIMAL)
    with pytest.raises(SpecError, match="hypothesis") as err:
        spec.require_plan()
    assert str(err.value).startswith(
        "training refuses to start: the spec has no `hypothesis` (behaviour, metric, "
        "min_effect) and no entry in `guardrails`. Say what"
    )
    hypothesis = {"behaviour": "b", "metric": "accuracy", "min_effect": 0.0}
    with pytest.raises(SpecError) as err:
        validate_spec({**MINIMAL, "hypothesis": hypothesis}).require_plan()
    assert "the spec has no entry in `guardrails`. Say" in str(err.value)
    planned = validate_spec(
        {
            **MINIMAL,
            "hypothesis": {"behaviour": "b", "metric": "accuracy", "min_effect": 0.0},
            "guardrails": [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}],
        }
    )
    planned.require_plan()


def test_init_template_is_a_valid_spec(tmp_path):
    from tunelab.stages.init import init_lab

    result = init_lab(tmp_path, "classification")
    spec = load_spec(Path(result["spec"]))
    assert spec.hypothesis is not None and spec.guardrails
    with pytest.raises(FileExistsError):
        init_lab(tmp_path, "classification")


@pytest.mark.parametrize("task", ["classification", "extraction", "format", "image_classification"])
def test_init_writes_a_valid_template_for_each_task_type(tmp_path, task):
    from tunelab.stages.init import init_lab

    result = init_lab(tmp_path, task)
    spec = load_spec(Path(result["spec"]))
    assert spec.task.type == task and spec.hypothesis is not None and spec.guardrails
    assert "id:" in Path(result["spec"]).read_text()  # the stable id column is shown
    if task == "image_classification":
        assert spec.model_kind == "image" and spec.data.sources[0].type == "image_folder"
    elif task != "classification":
        assert spec.data.fields.id == "id" and spec.model.kind == "causal"


# --- where an error comes from: the file's line, or the command line -------------------------

FILE_SPEC = {
    **MINIMAL,
    "hypothesis": {"behaviour": "b", "metric": "accuracy", "min_effect": 0.0},
    "guardrails": [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}],
    "training": {"lr": 5e-3, "global_batch": 8, "microbatch": 4},
}


def line_of(path: Path, text: str) -> int:
    """The 1-based line of the first line of `path` that holds `text`."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def problem(path: Path, overrides: list[str] | None = None, raw: dict | None = None) -> str:
    """The one problem line of the SpecError that loading `path` (or `raw`) raises."""
    if raw is not None:
        path = write(path.parent, raw)
    with pytest.raises(SpecError) as err:
        load_spec(path, parse_overrides(overrides or []))
    lines = str(err.value).splitlines()
    assert len(lines) == 1 and ": the spec is not valid: " in lines[0], lines  # one line
    return lines[0].split(": the spec is not valid: ", 1)[1]


def test_an_override_error_names_the_override_not_a_line_of_the_file(tmp_path):
    path = write(tmp_path, FILE_SPEC)  # its own `lr: 0.005` is correct
    text = problem(path, ["training.lr=abc"])
    assert text.startswith("training.lr=abc (command line), field `training.lr`: ")
    assert not re.search(r"line \d", text) and "valid number" in text
    # a field the file does not have, and a section's type, likewise
    assert problem(path, ["training.lr_typo=1"]).startswith(
        "training.lr_typo=1 (command line), field `training.lr_typo`: "
    )
    assert problem(path, ["method.type=bogus"]).startswith(
        "method.type=bogus (command line), field `method.type`: "
    )
    # the same bad value written in the file is reported at its line
    bad = {**FILE_SPEC, "training": {**FILE_SPEC["training"], "lr": "abc"}}
    text = problem(path, raw=bad)
    assert text.startswith(f"line {line_of(path, 'lr: abc')}, field `training.lr`: ")


def test_the_header_says_when_overrides_took_part(tmp_path):
    path = write(tmp_path, FILE_SPEC)
    with pytest.raises(SpecError) as err:
        load_spec(path, parse_overrides(["training.lr=abc", "training.global_batch=x"]))
    head = str(err.value).splitlines()[0]
    assert head == f"{path} with the command-line overrides: the spec is not valid (2 problems):"


def test_cross_field_errors_carry_the_line_of_their_field(tmp_path):
    raw = {**FILE_SPEC, "hypothesis": {**FILE_SPEC["hypothesis"], "metric": "bleu"}}
    text = problem(tmp_path / "tunelab.yaml", raw=raw)
    line = line_of(tmp_path / "tunelab.yaml", "metric: bleu")
    assert text.startswith(f"line {line}, field `hypothesis.metric`: 'bleu' is not a ")

    raw = {**FILE_SPEC, "guardrails": [{"metric": "f1", "scope": "every_field", "max_drop": 0}]}
    text = problem(tmp_path / "tunelab.yaml", raw=raw)
    line = line_of(tmp_path / "tunelab.yaml", "scope: every_field")
    assert text.startswith(f"line {line}, field `guardrails.0.scope`: 'every_field' does ")

    raw = {**FILE_SPEC, "training": {"global_batch": 8, "microbatch": 3}}
    text = problem(tmp_path / "tunelab.yaml", raw=raw)
    line = line_of(tmp_path / "tunelab.yaml", "microbatch: 3")
    assert text.startswith(f"line {line}, field `training.microbatch`: global_batch (8) ")


def test_a_cross_field_error_an_override_takes_part_in_names_it(tmp_path):
    path = write(tmp_path, FILE_SPEC)
    # the override is the field the check is about
    text = problem(path, ["training.microbatch=3"])
    assert text.startswith("training.microbatch=3 (command line), field `training.microbatch`")
    # the override is another field the check reads: the file's line, and the override
    text = problem(path, ["training.global_batch=10"])
    line = line_of(path, "microbatch: 4")
    assert text.startswith(
        f"line {line}, with training.global_batch=10 (command line), "
        "field `training.microbatch`: global_batch (10) must be a multiple of microbatch (4)"
    )
    # a section only the overrides wrote has no line in the file
    text = problem(path, ["training.budget.steps=3", "training.budget.epochs=1"])
    assert text.startswith(
        "with training.budget.steps=3, training.budget.epochs=1 (command line), "
        "field `training.budget`: give exactly one of steps or epochs"
    )


def test_origin_of_a_field_for_other_messages(tmp_path):
    path = write(tmp_path, FILE_SPEC)
    assert origin_of("training.lr", path) == f"tunelab.yaml line {line_of(path, 'lr: 0.005')}"
    assert origin_of("method.target_modules", path) == "the default"
    overrides = parse_overrides(["method.target_modules=[q_proj, v_proj]"])
    where = origin_of("method.target_modules", path, overrides)
    assert where == "method.target_modules=[q_proj, v_proj] (command line)"


def test_packing_is_for_causal_lm_examples_only():
    """A classifier's head reads one example per row: packing is refused, naming the field."""
    with pytest.raises(SpecError, match=r"training\.packing.*encoder classifier"):
        validate_spec({**MINIMAL, "training": {"packing": True}})
    task = {"type": "extraction", "json_schema": {"type": "object"}, "required": ["name"]}
    causal = {**MINIMAL, "task": task}
    assert validate_spec({**causal, "training": {"packing": True}}).training.packing


def test_a_regex_that_does_not_compile_is_refused_at_its_line(tmp_path):
    raw = {**MINIMAL, "task": {"type": "format", "regex": "ANSWER: ([0-9]+"}}
    path = write(tmp_path, raw)
    with pytest.raises(SpecError) as err:  # not after a baseline's generation or a run
        load_spec(path)
    line = path.read_text().splitlines().index("  regex: 'ANSWER: ([0-9]+'") + 1
    assert f"line {line}, field `task.regex`" in str(err.value)
    assert "missing ), unterminated subpattern" in str(err.value)


def test_an_override_is_a_mapping_or_list_only_when_written_in_brackets():
    said = parse_overrides(
        ["task.regex=ANSWER: (", "task.instruction=Say: 5", "task.regex2=ANSWER: [", "a={b: 1}"]
    )
    assert said == {
        "task.regex": "ANSWER: (",  # YAML alone reads the mapping {ANSWER: (}
        "task.instruction": "Say: 5",
        "task.regex2": "ANSWER: [",  # which YAML cannot read at all
        "a": {"b": 1},
    }
    assert parse_overrides(["m=[q_proj, v_proj]", "n=- x"]) == {
        "m": ["q_proj", "v_proj"],
        "n": "- x",
    }
    with pytest.raises(SpecError, match=r"override 'm=\[q_proj, v_proj': the value is not a YAML"):
        parse_overrides(["m=[q_proj, v_proj"])
    # YAML's block scalar indicators: `|` alone read as the empty text, a separator refused
    assert parse_overrides(["task.separator=|", "x=> 5"]) == {"task.separator": "|", "x": "> 5"}


def test_on_off_yes_and_no_are_words_not_booleans(tmp_path):
    """YAML 1.1 reads them as booleans: a forgetting guardrail's `on:` key was True ("Keys
    should be strings"), as in the README's own example; a boolean field still takes them."""
    path = tmp_path / "tunelab.yaml"
    path.write_text(
        "data: {sources: [{type: jsonl, path: d.jsonl}]}\n"
        "model: {path: m, kind: causal}\n"
        "task: {type: format, regex: 'A: .+'}\n"
        "guardrails:\n"
        "  - {metric: bits_per_byte, on: general/bbc_news.jsonl, max_drop: 0.05}\n"
        "training: {packing: yes}\n"
    )
    spec = load_spec(path, parse_overrides(["task.instruction=no"]))
    assert spec.guardrails[0].on == "general/bbc_news.jsonl"
    assert spec.training.packing is True and spec.task.instruction == "no"


def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path):
    """PyYAML kept the last of two `lr`s silently: an edit below the old value won unseen."""
    text = yaml.safe_dump(MINIMAL, sort_keys=False) + "training:\n  lr: 5.0e-4\n  lr: 1.0e-3\n"
    (tmp_path / "tunelab.yaml").write_text(text)
    with pytest.raises(SpecError, match=r"the key 'lr' is given twice in one mapping, at lines"):
        load_spec(tmp_path / "tunelab.yaml")
    merged = (  # a merge key and the key that overrides it are not a key given twice
        "defaults: &d {lr: 5.0e-4, seed: 1}\n"
        "data: {sources: [{type: jsonl, path: d.jsonl}]}\n"
        "model: {path: m}\n"
        "training:\n  <<: *d\n  lr: 1.0e-3\n"
    )
    raw = load_yaml(merged)
    assert raw["training"] == {"lr": 1.0e-3, "seed": 1}


def test_a_tab_in_the_indentation_says_so(tmp_path):
    text = yaml.safe_dump(MINIMAL, sort_keys=False) + "training:\n\tlr: 1.0e-3\n"
    (tmp_path / "tunelab.yaml").write_text(text)
    with pytest.raises(SpecError, match=r"indent with spaces: YAML takes no tabs"):
        load_spec(tmp_path / "tunelab.yaml")


def test_a_spec_that_is_not_utf8_names_its_line(tmp_path):
    """It was an internal error (exit 1) with a byte position."""
    text = yaml.safe_dump(MINIMAL, sort_keys=False).encode() + b"# caf\xe9\n"
    (tmp_path / "tunelab.yaml").write_bytes(text)
    line = text.count(b"\n")
    with pytest.raises(SpecError, match=rf"tunelab.yaml:{line}: not UTF-8 text \(byte 0xe9\)"):
        load_spec(tmp_path / "tunelab.yaml")


def test_an_override_below_a_plain_value_is_refused_in_its_words():
    """`training.lr.x=1` was an internal error: 'float' object does not support item
    assignment."""
    raw = {"training": {"lr": 0.001}}
    with pytest.raises(SpecError, match=r"training.lr is a value \(0.001\), not a section"):
        apply_overrides(raw, {"training.lr.x": 1})
