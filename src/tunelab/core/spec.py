"""The typed lab spec (`tunelab.yaml`): load, validate, `key=value` overrides, dump.

Every section is a pydantic model with a docstring per field and its checks where it is
defined. YAML is only the saved form. Validation errors name the file, the line and the
dotted field, and say what is wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from tunelab.core.data_sections import (
    CleaningRule,
    DataSpec,
    DedupSpec,
    Fields,
    ImagesSpec,
    Mixture,
    MixtureStage,
    Source,
    SplitSpec,
)
from tunelab.core.errors import SpecError
from tunelab.core.multilabel import MultilabelTask, check_multilabel
from tunelab.core.origin import origin_of, problems
from tunelab.core.overrides import apply_overrides, parse_overrides
from tunelab.core.scratch import check_scratch
from tunelab.core.sections import (
    Budget,
    ClassificationTask,
    Compass,
    EvaluationSpec,
    ExtractionTask,
    FieldError,
    FormatTask,
    FullMethod,
    Guardrail,
    Hypothesis,
    ImageClassificationTask,
    LoraMethod,
    MethodSpec,
    ModelSpec,
    PretrainTask,
    RentalSpec,
    TaskSpec,
    TrainingSpec,
    _Section,
)
from tunelab.core.spec_yaml import load_yaml

# The sections are re-exported: `from tunelab.core.spec import ModelSpec` is the public path.
__all__ = [
    "SPEC_FILE",
    "Budget",
    "ClassificationTask",
    "CleaningRule",
    "Compass",
    "DataSpec",
    "DedupSpec",
    "EvaluationSpec",
    "ExtractionTask",
    "FieldError",
    "Fields",
    "FormatTask",
    "FullMethod",
    "Guardrail",
    "Hypothesis",
    "ImageClassificationTask",
    "ImagesSpec",
    "LoraMethod",
    "MethodSpec",
    "Mixture",
    "MixtureStage",
    "ModelSpec",
    "MultilabelTask",
    "PretrainTask",
    "RentalSpec",
    "Source",
    "Spec",
    "SpecError",
    "SplitSpec",
    "TaskSpec",
    "TrainingSpec",
    "apply_overrides",
    "dump_spec",
    "load_spec",
    "origin_of",
    "parse_overrides",
    "validate_spec",
]

SPEC_FILE = "tunelab.yaml"


class Spec(_Section):
    compass: Compass = Compass()
    hypothesis: Hypothesis | None = None
    guardrails: list[Guardrail] = Field(default_factory=list)
    task: TaskSpec = ClassificationTask()
    data: DataSpec
    model: ModelSpec
    method: MethodSpec = LoraMethod()
    training: TrainingSpec = TrainingSpec()
    evaluation: EvaluationSpec = EvaluationSpec()
    rental: RentalSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _default_types(cls, raw: Any) -> Any:
        """`task: {labels: [...]}` without a type means classification, and `method: {r: 4}`
        (or the override `method.r=4` on a spec without a method) means LoRA: the defaults."""
        if isinstance(raw, dict):
            for section, default in (("task", "classification"), ("method", "lora")):
                if isinstance(raw.get(section), dict):
                    raw[section].setdefault("type", default)
        return raw

    @model_validator(mode="after")
    def _metrics_known(self) -> Spec:
        """The hypothesis and guardrails name metrics and scopes the task has; each error names
        its field, so it is reported at that field's line."""
        from tunelab.tasks import get_task

        task = get_task(self.task.type)
        if self.hypothesis and self.hypothesis.metric not in task.overall_metrics:
            raise FieldError(
                "hypothesis.metric",
                f"{self.hypothesis.metric!r} is not a metric of task {self.task.type}; "
                f"choose one of {sorted(task.overall_metrics)}",
            )
        for i, g in enumerate(self.guardrails):
            if g.scope not in ("overall", task.group_scope):
                raise FieldError(
                    f"guardrails.{i}.scope",
                    f"{g.scope!r} does not apply to {self.task.type}; use overall"
                    + (f" or {task.group_scope}" if task.group_scope else ""),
                )
            if g.on is not None:  # a forgetting guardrail: its own text and measures
                if self.model_kind != "causal":
                    raise FieldError(
                        f"guardrails.{i}.on",
                        "a forgetting guardrail scores text with a causal language model; "
                        f"this lab's model is an {self.model_kind} classifier",
                    )
                continue
            if g.source is not None and g.scope != "every_source":
                raise FieldError(
                    f"guardrails.{i}.source", "a source is named only with scope every_source"
                )
            sources = [s.source_name for s in self.data.sources]
            if g.source is not None and g.source not in sources:
                raise FieldError(
                    f"guardrails.{i}.source",
                    f"{g.source!r} is not a source of this lab; its sources are {sources} "
                    "(data.sources[i].name, else each file's or folder's name)",
                )
            known = task.overall_metrics if g.scope == "overall" else task.class_metrics
            if g.metric not in known:
                scope = "an overall" if g.scope == "overall" else f"an {g.scope}"
                raise FieldError(
                    f"guardrails.{i}.metric",
                    f"{g.metric!r} is not {scope} metric of {self.task.type}; "
                    f"choose one of {sorted(known)}",
                )
        return self

    @model_validator(mode="after")
    def _head_init_has_a_head(self) -> Spec:
        """`method.head_init: probe` starts a new classification head from a probe: only a
        classifier with a new head (an encoder) has one."""
        if self.method.head_init == "probe" and self.model_kind not in ("encoder", "image"):
            raise FieldError(
                "method.head_init",
                "probe initialises a new classification head, and this lab has none (its "
                f"model kind is {self.model_kind}); use head_init: new",
            )
        return self

    @model_validator(mode="after")
    def _packing_has_rows_to_pack(self) -> Spec:
        """`training.packing` joins a causal LM's examples; a classifier's head reads one
        example per row, and task pretrain packs its documents already."""
        if not self.training.packing:
            return self
        if self.model_kind != "causal":
            why = f"this lab's model is an {self.model_kind} classifier, one example per row"
        elif self.task.type == "pretrain":
            why = "task pretrain packs its documents already (task.boundaries)"
        else:
            return self
        raise FieldError(
            "training.packing", f"packing joins causal-LM examples, and {why}; set packing: false"
        )

    @model_validator(mode="after")
    def _multilabel_fits(self) -> Spec:
        """Task multilabel: an encoder, and rows that can hold a set of labels
        (`core.multilabel.check_multilabel`)."""
        check_multilabel(self)
        return self

    @model_validator(mode="after")
    def _scratch_fits(self) -> Spec:
        """A scratch model, task pretrain and a token budget go together (`core.scratch`)."""
        check_scratch(self)
        return self

    @model_validator(mode="after")
    def _image_model(self) -> Spec:
        """An image lab's model is an image classifier: `model.kind` stays auto."""
        if self.images and self.model.kind != "auto":
            raise FieldError(
                "model.kind",
                f"{self.model.kind} reads texts, and task image_classification trains an image "
                "classifier (AutoModelForImageClassification); leave model.kind as auto",
            )
        return self

    @model_validator(mode="after")
    def _conversations_fit(self) -> Spec:
        """Conversations are answers to generate: a generative task with a target (extraction,
        format), the chat template that renders their turns, and no cleaning rules (they
        apply to a text column, and a conversation is taken as it is)."""
        if not self.data.fields.conversations:
            return self
        field = "data.fields." + ("messages" if self.data.fields.messages else "prompt")
        if not (self.task.generative and self.task.needs_target):
            raise FieldError(
                field,
                f"conversations are answers to learn and generate (task extraction or format), "
                f"not task {self.task.type}",
            )
        if self.model.template != "chat":
            raise FieldError(
                "model.template",
                "conversations are rendered by the tokenizer's chat template: set template: chat",
            )
        for i, source in enumerate(self.data.sources):
            if source.type in ("folder", "image_folder"):
                raise FieldError(
                    f"data.sources.{i}.type",
                    f"a source of type {source.type} holds texts, not conversations: use "
                    "jsonl, csv, parquet or hf_dataset rows with the turns",
                )
        if self.data.cleaning:
            raise FieldError(
                "data.cleaning",
                "cleaning rules apply to a text column; conversations are taken as they are "
                "(clean the turns before `tunelab data`, or remove the rules)",
            )
        return self

    @property
    def model_kind(self) -> str:
        """encoder (a new classification head on a text encoder), causal (generation, label
        scoring) or image (an image classifier with a new head: task image_classification)."""
        if self.images:
            return "image"
        if self.model.kind != "auto":
            return self.model.kind
        return "causal" if self.task.generative else "encoder"

    @property
    def prompted(self) -> bool:
        """A causal model answering a prompt (its template around each row's input, or a
        conversation's turns), not a language model on documents (task pretrain)."""
        return self.model_kind == "causal" and self.task.type != "pretrain"

    @property
    def images(self) -> bool:
        """The examples are images (task image_classification), not texts."""
        return isinstance(self.task, ImageClassificationTask)

    def require_sizable(self) -> None:
        """`tunelab size` plans the memory of text models (a transformer's shapes); an image
        lab is refused before anything loads."""
        if self.images:
            raise SpecError(
                "task.type: image_classification: `tunelab size` estimates and measures the "
                "memory of text models only, not yet of image classifiers. `tunelab check` "
                "trains two steps of the real model, and every run records its peak memory."
            )

    def require_plan(self) -> None:
        """Training refuses to start without a hypothesis and at least one guardrail."""
        missing = []
        if self.hypothesis is None:
            missing.append("no `hypothesis` (behaviour, metric, min_effect)")
        if not self.guardrails:
            missing.append("no entry in `guardrails`")
        if missing:
            raise SpecError(
                "training refuses to start: the spec has "
                + " and ".join(missing)
                + ". Say what should improve and what must not degrade first "
                "(see `tunelab init` for an example)."
            )

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


# --- loading ---------------------------------------------------------------------------------


def load_spec(path: Path, overrides: dict[str, Any] | None = None) -> Spec:
    """Read, override and validate a spec file; errors name the file, line and field, or the
    command-line override that caused them."""
    path = Path(path)
    if not path.exists():
        raise SpecError(f"{path}: no spec here. Create one with `tunelab init`.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        line = err.object[: err.start].count(b"\n") + 1
        raise SpecError(
            f"{path}:{line}: not UTF-8 text (byte 0x{err.object[err.start]:02x}); save the spec "
            "as UTF-8 (another encoding converts with `iconv -t UTF-8`)"
        ) from None
    try:
        raw = load_yaml(text) or {}
    except yaml.YAMLError as err:
        tabs = " (indent with spaces: YAML takes no tabs)" if "'\\t'" in str(err) else ""
        raise SpecError(f"{path}: not valid YAML{tabs}: {err}") from err
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: the spec must be a mapping of sections (compass, task, ...)")
    overrides = overrides or {}
    return validate_spec(apply_overrides(raw, overrides), path, text, overrides, written=True)


def validate_spec(
    raw: dict[str, Any],
    path: Path | str = SPEC_FILE,
    text: str = "",
    overrides: dict[str, Any] | None = None,
    written: bool = False,
) -> Spec:
    """The spec `raw` (read from `path`, whose `text` gives the lines, with `overrides`
    applied), or a SpecError listing each problem where it comes from. `written`: `raw` is
    what a user wrote (the lab's tunelab.yaml), not a record's spec, where every default is
    written out; a field set that would not be read is refused only there."""
    try:
        return Spec.model_validate(raw, context={"written": written})
    except ValidationError as err:
        raise SpecError(problems(err, path, text, overrides or {}, Spec)) from None


def dump_spec(spec: Spec) -> str:
    return yaml.safe_dump(spec.to_dict(), sort_keys=False)
