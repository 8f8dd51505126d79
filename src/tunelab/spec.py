"""The typed lab spec (`tunelab.yaml`): load, validate, `key=value` overrides, dump.

Every section is a pydantic model with a docstring per field and its checks where it is
defined. YAML is only the saved form. Validation errors name the file, the line and the
dotted field, and say what is wrong.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

SPEC_FILE = "tunelab.yaml"


class SpecError(ValueError):
    """A spec that cannot be used; the message names the file, line and field."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Compass(_Section):
    kind: Literal["benchmark", "research", "production"] = "production"
    """Why this model is trained: a benchmark entry, a research question, or production use."""
    why: str = ""
    """One sentence on what the model is for."""


class Hypothesis(_Section):
    behaviour: str = Field(min_length=1)
    """The behaviour to improve, in words."""
    metric: str
    """The primary metric (for classification: accuracy or macro_f1)."""
    min_effect: float = Field(ge=0)
    """The smallest gain in the primary metric that would count (absolute, e.g. 0.02)."""


class Guardrail(_Section):
    metric: str
    """What must not degrade: an overall metric, or a per-class metric (f1, precision, recall)."""
    scope: Literal["overall", "every_class"] = "overall"
    """`overall`: the metric itself; `every_class`: the per-class metric of each class."""
    max_drop: float = Field(ge=0)
    """The largest drop allowed against the baseline (absolute)."""


class ClassificationTask(_Section):
    type: Literal["classification"] = "classification"
    labels: list[str] | None = None
    """The label set in a fixed order; inferred (sorted) from the data when left out."""


TaskSpec = Annotated[ClassificationTask, Field(discriminator="type")]


class Source(_Section):
    type: str
    """Loader name: jsonl, csv or folder (one sub-folder per label)."""
    path: str
    """File or folder, relative to the lab folder unless absolute."""
    split: Literal["train", "validation", "test"] | None = None
    """Set when this source already is one split: the user's split is kept as it is."""


class Fields(_Section):
    text: str = "text"
    """Column holding the input text."""
    label: str = "label"
    """Column holding the label."""
    id: str | None = None
    """Column holding a stable example id (default: source file and line)."""
    group: str | None = None
    """Column whose rows must all land in one split (e.g. the same author or document)."""
    split: str | None = None
    """Column naming each row's split, when the data comes already split."""


class CleaningRule(_Section):
    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)
    rule: str
    """Rule name (unicode_nfkc, whitespace, strip_regex, lowercase); extra keys are its options."""


class SplitSpec(_Section):
    train: float = Field(0.7, gt=0, lt=1)
    validation: float = Field(0.15, gt=0, lt=1)
    test: float = Field(0.15, gt=0, lt=1)
    seed: int = 0
    """Seed of the deterministic split."""
    stratify: bool = True
    """Keep the label proportions in every split."""

    @model_validator(mode="after")
    def _sum_to_one(self) -> SplitSpec:
        total = self.train + self.validation + self.test
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"train + validation + test must sum to 1, got {total:g}")
        return self


class DedupSpec(_Section):
    exact: bool = True
    """Find exact duplicates after normalisation (case, unicode, whitespace)."""
    policy: Literal["drop_from_train", "report"] = "drop_from_train"
    """What to do with a duplicate: drop the train copy, or only report it."""


class DataSpec(_Section):
    sources: list[Source] = Field(min_length=1)
    fields: Fields = Fields()
    cleaning: list[CleaningRule] = []
    split: SplitSpec = SplitSpec()
    dedup: DedupSpec = DedupSpec()


class ModelSpec(_Section):
    path: str
    """Local folder of the pretrained model (nothing is downloaded)."""
    revision: str | None = None
    """Optional label of the base model's revision, recorded with its weight hash."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    max_length: int = Field(256, gt=0)
    """Longest input in tokens; longer inputs are truncated."""
    trust_remote_code: bool = False


class LoraMethod(_Section):
    type: Literal["lora"] = "lora"
    r: int = Field(8, gt=0)
    alpha: float = Field(16, gt=0)
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] = Field(default_factory=lambda: ["query", "value"], min_length=1)
    """Module-name suffixes that receive an adapter; each must match at least one module."""
    modules_to_save: list[str] = Field(default_factory=lambda: ["classifier"])
    """Modules trained in full and saved with the adapter (a new classification head)."""


class FullMethod(_Section):
    type: Literal["full"] = "full"


MethodSpec = Annotated[LoraMethod | FullMethod, Field(discriminator="type")]


class Budget(_Section):
    steps: int | None = Field(None, gt=0)
    """Optimizer steps to train."""
    epochs: float | None = Field(None, gt=0)
    """Passes over the train split (converted to steps and recorded)."""

    @model_validator(mode="after")
    def _exactly_one(self) -> Budget:
        if (self.steps is None) == (self.epochs is None):
            raise ValueError("give exactly one of steps or epochs")
        return self


class TrainingSpec(_Section):
    optimizer: Literal["adamw"] = "adamw"
    lr: float = Field(5e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    schedule: Literal["constant", "linear", "cosine"] = "linear"
    warmup_steps: int = Field(0, ge=0)
    global_batch: int = Field(16, gt=0)
    """Examples per optimizer step."""
    microbatch: int = Field(8, gt=0)
    """Examples per forward/backward; accumulation = global_batch / microbatch."""
    budget: Budget = Budget(epochs=1)
    seed: int = 0
    max_grad_norm: float | None = Field(1.0, gt=0)
    precision: Literal["fp32", "bf16"] = "fp32"
    """bf16 uses autocast; weights stay in model.dtype."""

    @model_validator(mode="after")
    def _divisible(self) -> TrainingSpec:
        if self.global_batch % self.microbatch:
            raise ValueError(
                f"global_batch ({self.global_batch}) must be a multiple of microbatch "
                f"({self.microbatch})"
            )
        return self

    @property
    def accumulation(self) -> int:
        return self.global_batch // self.microbatch


class EvaluationSpec(_Section):
    split: Literal["validation"] = "validation"
    """Variants are compared on validation; the test split is opened only by `final`."""
    batch_size: int = Field(32, gt=0)


class RentalSpec(_Section):
    days: Literal[3, 7, 30] = 7
    device: str = "cpu"
    price_per_hour: float | None = Field(None, ge=0)


class Spec(_Section):
    compass: Compass = Compass()
    hypothesis: Hypothesis | None = None
    guardrails: list[Guardrail] = []
    task: TaskSpec = ClassificationTask()
    data: DataSpec
    model: ModelSpec
    method: MethodSpec = LoraMethod()
    training: TrainingSpec = TrainingSpec()
    evaluation: EvaluationSpec = EvaluationSpec()
    rental: RentalSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _default_task_type(cls, raw: Any) -> Any:
        """`task: {labels: [...]}` without a type means classification."""
        if isinstance(raw, dict) and isinstance(raw.get("task"), dict):
            raw["task"].setdefault("type", "classification")
        return raw

    @model_validator(mode="after")
    def _metrics_known(self) -> Spec:
        from tunelab.tasks import get_task

        task = get_task(self.task.type)
        if self.hypothesis and self.hypothesis.metric not in task.overall_metrics:
            raise ValueError(
                f"hypothesis.metric {self.hypothesis.metric!r} is not a {self.task.type} metric; "
                f"choose one of {sorted(task.overall_metrics)}"
            )
        for i, g in enumerate(self.guardrails):
            known = task.overall_metrics if g.scope == "overall" else task.class_metrics
            if g.metric not in known:
                raise ValueError(
                    f"guardrails[{i}].metric {g.metric!r} is not a {g.scope} metric of "
                    f"{self.task.type}; choose one of {sorted(known)}"
                )
        return self

    def require_plan(self) -> None:
        """Training refuses to start without a hypothesis and at least one guardrail."""
        missing = []
        if self.hypothesis is None:
            missing.append("a `hypothesis` (behaviour, metric, min_effect)")
        if not self.guardrails:
            missing.append("at least one entry in `guardrails`")
        if missing:
            raise SpecError(
                "training refuses to start: the spec has no "
                + " and no ".join(missing)
                + ". Say what should improve and what must not degrade first "
                "(see `tunelab init` for an example)."
            )

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


# --- loading ---------------------------------------------------------------------------------


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`a.b=1` -> {"a.b": 1}; the value is read as YAML (numbers, booleans, lists)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise SpecError(f"override {item!r}: expected key=value, e.g. training.lr=1e-4")
        out[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
    return out


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Set dotted keys in a copy of the raw spec; list items are addressed by index.

    Changing a section's `type` (e.g. `method.type=full`) starts that section afresh, since
    the old type's options (a LoRA rank) mean nothing to the new one.
    """
    data = copy.deepcopy(raw)
    for dotted, value in overrides.items():
        node: Any = data
        parts = dotted.split(".")
        for part in parts[:-1]:
            node = _child(node, part, dotted)
        last = parts[-1]
        if last == "type" and isinstance(node, dict) and node.get("type") != value:
            node.clear()
        if isinstance(node, list):
            node[_index(last, dotted, len(node))] = value
        else:
            node[last] = value
    return data


def _index(part: str, dotted: str, size: int) -> int:
    if not part.isdigit() or int(part) >= size:
        raise SpecError(f"override {dotted!r}: {part!r} is not an index below {size}")
    return int(part)


def _child(node: Any, part: str, dotted: str) -> Any:
    if isinstance(node, list):
        return node[_index(part, dotted, len(node))]
    if not isinstance(node, dict):
        raise SpecError(f"override {dotted!r}: {part!r} is inside a value, not a section")
    if part not in node or node[part] is None:
        node[part] = {}
    return node[part]


def load_spec(path: Path, overrides: dict[str, Any] | None = None) -> Spec:
    """Read, override and validate a spec file; errors name the file, line and field."""
    path = Path(path)
    if not path.exists():
        raise SpecError(f"{path}: no spec here. Create one with `tunelab init`.")
    text = path.read_text(encoding="utf-8")
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise SpecError(f"{path}: not valid YAML: {err}") from err
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: the spec must be a mapping of sections (compass, task, ...)")
    return validate_spec(apply_overrides(raw, overrides or {}), path, text)


def validate_spec(raw: dict[str, Any], path: Path | str = SPEC_FILE, text: str = "") -> Spec:
    try:
        return Spec.model_validate(raw)
    except ValidationError as err:
        lines = [f"{path}: the spec is not valid ({err.error_count()} problem(s)):"]
        root = yaml.compose(text) if text else None
        for e in err.errors():
            loc = [str(p) for p in e["loc"] if not _is_union_tag(p)]
            field = ".".join(loc) or "(top level)"
            line = _line_of(root, loc)
            where = f"line {line}, " if line else ""
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"  - {where}field `{field}`: {msg}")
        raise SpecError("\n".join(lines)) from None


def _is_union_tag(part: Any) -> bool:
    return part in {"lora", "full", "classification"}


def _line_of(node: Any, loc: list[str]) -> int | None:
    """The 1-based YAML line of the deepest existing key on the path `loc`."""
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if k.value == part), None)
            if match is None:
                return line
            key = next(k for k, v in node.value if v is match)
            line, node = key.start_mark.line + 1, match
        elif isinstance(node, yaml.SequenceNode) and part.isdigit() and int(part) < len(node.value):
            node = node.value[int(part)]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def dump_spec(spec: Spec) -> str:
    return yaml.safe_dump(spec.to_dict(), sort_keys=False)
