from pathlib import Path

import pytest
import yaml

from tunelab.core.spec import SpecError, apply_overrides, load_spec, parse_overrides, validate_spec

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


def test_bad_override_is_refused():
    with pytest.raises(SpecError, match="key=value"):
        parse_overrides(["training.lr"])


def test_training_refuses_without_hypothesis_or_guardrail():
    spec = validate_spec(MINIMAL)
    with pytest.raises(SpecError, match="hypothesis") as err:
        spec.require_plan()
    assert "guardrails" in str(err.value)
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


@pytest.mark.parametrize("task", ["classification", "extraction", "format"])
def test_init_writes_a_valid_template_for_each_task_type(tmp_path, task):
    from tunelab.stages.init import init_lab

    result = init_lab(tmp_path, task)
    spec = load_spec(Path(result["spec"]))
    assert spec.task.type == task and spec.hypothesis is not None and spec.guardrails
    assert "id:" in Path(result["spec"]).read_text()  # the stable id column is shown
    if task != "classification":
        assert spec.data.fields.id == "id" and spec.model.kind == "causal"
