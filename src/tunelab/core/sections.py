"""The sections of the lab spec, each a pydantic model with a docstring per field.

`tunelab.core.spec` assembles them into `Spec` and holds loading, overrides and error reporting;
the `data` section lives in `tunelab.core.data_sections`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from tunelab.core.multilabel import MultilabelTask
from tunelab.core.scratch import Arch, Bpe, PretrainTask, check_init
from tunelab.core.section_base import FieldError, _Section
from tunelab.core.spec_paths import spec_path


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
    """What must not degrade: an overall metric, or a per-class / per-field metric."""
    scope: Literal["overall", "every_class", "every_field", "every_source"] = "overall"
    """`overall`: the metric itself; `every_class` / `every_field` / `every_source`: that
    metric of each class (classification), each required field (extraction) or each data
    source (pretrain)."""
    source: str | None = None
    """With `every_source`: judge only this source (e.g. `code`), not every one."""
    max_drop: float = Field(ge=0)
    """The largest drop allowed against the baseline (absolute). For a metric where less is
    better (bits per byte), the largest rise."""
    on: str | None = None
    """A forgetting guardrail: a second, fixed text the task never trains on (a file in the
    lab: JSONL rows with a `text`, or plain text whose documents are separated by blank
    lines), e.g. general prose the base model already models well. The metric is then
    `bits_per_byte` or `loss` of the model on that text (a causal model), judged against the
    reference like every guardrail. The file is versioned with the data: its rows and sha256
    are part of the data version (`data/guard_sets.py`)."""

    @model_validator(mode="after")
    def _forgetting_measures(self) -> Guardrail:
        if self.on is not None:
            if self.metric not in FORGETTING_METRICS:
                raise FieldError(
                    "metric",
                    f"a guardrail `on` a text measures {' or '.join(FORGETTING_METRICS)} "
                    f"there, not {self.metric!r}",
                )
            if self.scope != "overall":
                raise FieldError("scope", "a guardrail `on` a text is judged overall")
        return self


FORGETTING_METRICS = ("bits_per_byte", "loss")
"""What a forgetting guardrail (`on`) measures on its text: less is better."""


def two_or_more(labels: list[str] | None) -> list[str] | None:
    """A classifier's listed labels: two or more, or none (taken from the data)."""
    if labels is not None and len(labels) < 2:
        raise ValueError(
            f"{len(labels)} label(s) listed: a classifier needs two or more; leave task.labels "
            "out to take them from the data"
        )
    return labels


class ClassificationTask(_Section):
    type: Literal["classification"] = "classification"
    labels: list[str] | None = None
    """The label set in a fixed order; inferred (sorted) from the data when left out."""
    instruction: str = "Which category does this text belong to?"
    """Prompt instruction when a causal LM classifies by scoring each label's text."""

    generative: ClassVar[bool] = False
    needs_target: ClassVar[bool] = False

    @field_validator("labels")
    @classmethod
    def _two_or_more(cls, labels: list[str] | None) -> list[str] | None:
        return two_or_more(labels)


class ImageClassificationTask(_Section):
    type: Literal["image_classification"] = "image_classification"
    labels: list[str] | None = None
    """The label set in a fixed order; inferred (sorted) from the data when left out. Each
    example is an image (`data.fields.image`, or a file in a label folder of an
    `image_folder` source)."""

    generative: ClassVar[bool] = False
    needs_target: ClassVar[bool] = False

    @field_validator("labels")
    @classmethod
    def _two_or_more(cls, labels: list[str] | None) -> list[str] | None:
        return two_or_more(labels)


class ExtractionTask(_Section):
    type: Literal["extraction"] = "extraction"
    json_schema: dict[str, Any] | str
    """The answer's JSON Schema: inline, or a path to a .json file (relative to the lab)."""
    required: list[str] = Field(min_length=1)
    """Fields every answer must have; each is scored for presence and exact value."""
    instruction: str = "Extract the fields below from the text and answer with JSON only."

    generative: ClassVar[bool] = True
    needs_target: ClassVar[bool] = True


class FormatTask(_Section):
    type: Literal["format"] = "format"
    json_schema: dict[str, Any] | str | None = None
    """Answers must be JSON valid under this schema (inline or a path) ..."""
    regex: str | None = None
    """... or match this regular expression (whole answer)."""
    instruction: str = "Answer in the required format."

    generative: ClassVar[bool] = True
    needs_target: ClassVar[bool] = True

    @field_validator("regex")
    @classmethod
    def _compiles(cls, regex: str | None) -> str | None:
        if regex is not None:
            try:
                re.compile(regex)
            except re.error as err:
                raise ValueError(f"not a regular expression Python can compile: {err}") from None
        return regex

    @model_validator(mode="after")
    def _one_format(self) -> FormatTask:
        if (self.json_schema is None) == (self.regex is None):
            raise ValueError("give exactly one of json_schema or regex")
        return self


TaskSpec = Annotated[
    ClassificationTask
    | MultilabelTask
    | ImageClassificationTask
    | ExtractionTask
    | FormatTask
    | PretrainTask,
    Field(discriminator="type"),
]


class ModelSpec(_Section):
    path: str | None = None
    """Local folder of the pretrained model (nothing is downloaded); none for a scratch model."""
    init: Literal["pretrained", "scratch"] = "pretrained"
    """pretrained: load `path`; scratch: build `arch` with seeded random weights (a causal LM
    trained with `method: full`, for small ablations before a large run)."""
    arch: Arch | None = None
    """The architecture of a scratch model (see `tunelab.core.arch`)."""
    tokenizer: str | None = None
    """A scratch model's tokenizer: a folder with tokenizer files (relative to the lab unless
    absolute). Left out: a byte-level BPE (`bpe`) trained on the lab's train split."""
    bpe: Bpe | None = None
    """Settings of the BPE trained when `tokenizer` is left out (default: `Bpe()`)."""
    revision: str | None = None
    """Optional label of the base model's revision, recorded with its weight hash."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    max_length: int = Field(256, gt=0)
    """Longest sequence in tokens (prompt and target); the prompt's text is cut to fit."""
    trust_remote_code: bool = False
    kind: Literal["auto", "encoder", "causal"] = "auto"
    """encoder: a sequence classifier with a new head; causal: a causal LM (generative tasks,
    or classification by scoring each label's text). auto: encoder for classification."""
    template: Literal["plain", "chat"] = "plain"
    """plain: explicit separators (`### Input:` / `### Answer:`); chat: the tokenizer's chat
    template with the answer as the assistant turn."""
    truncation: Literal["left", "right"] = "right"
    """Which end of the input text is cut when the prompt is too long. The target never is."""
    loss_on_prompt: bool = False
    """Also train on the prompt tokens (rarely wanted; `tunelab inspect` warns about it)."""
    loss_on_turns: Literal["all", "last"] = "all"
    """Conversations (`data.fields.messages`, or prompt/completion): the assistant turns that
    carry the loss, every one or the last only. System and user text never does."""
    attention: Literal["auto", "sdpa", "eager"] = "auto"
    """The attention kernel: `sdpa` (torch's scaled_dot_product_attention), `eager` (the
    model's own matmul and softmax), or `auto` (transformers' choice: sdpa where the model
    supports it). The same function either way; a speed lever (bench/README.md)."""

    @model_validator(mode="after")
    def _init_needs(self) -> ModelSpec:
        """`path` for a pretrained model; `arch` (and a tokenizer or `bpe`) for a scratch one
        (`core.scratch.check_init`)."""
        check_init(self)
        return self

    @property
    def scratch(self) -> bool:
        return self.init == "scratch"

    def location(self, lab: Path) -> Path:
        """`path` as a path: relative to the lab folder unless absolute (`~` expanded)."""
        if self.path is None:
            raise ValueError("a scratch model (model.init: scratch) has no path")
        return spec_path(lab, self.path)


HeadInit = Literal["new", "probe"]
"""How a classifier's new head starts. new: at random (seeded by training.seed); probe: from a
linear probe fitted on the frozen model's own head features over the train split, then
fine-tuned (LP-FT, Kumar et al., ICLR 2022; `modeling/head_init.py`)."""


class LoraMethod(_Section):
    type: Literal["lora"] = "lora"
    r: int = Field(8, gt=0)
    alpha: float = Field(16, gt=0)
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] | None = Field(None, min_length=1)
    """Module-name suffixes (or full names) that receive an adapter; each must match at least
    one module. Left out: every linear layer inside the model's transformer blocks (attention
    and MLP; not the embeddings, the pooler or the head), resolved when the model is built and
    recorded as the run's `adapted_modules`."""
    modules_to_save: list[str] | None = None
    """Modules trained in full and saved with the adapter. Left out: PEFT's default for the
    task (a sequence classifier's new head, `classifier` or `score`; nothing for a causal LM)."""
    head_init: HeadInit = "new"
    """A classifier's new head: `new` (random) or `probe` (LP-FT)."""


class FullMethod(_Section):
    type: Literal["full"] = "full"
    head_init: HeadInit = "new"
    """A classifier's new head: `new` (random) or `probe` (LP-FT)."""


MethodSpec = Annotated[LoraMethod | FullMethod, Field(discriminator="type")]


class Budget(_Section):
    steps: int | None = Field(None, gt=0)
    """Optimizer steps to train."""
    epochs: float | None = Field(None, gt=0)
    """Passes over the train split (converted to steps and recorded)."""
    tokens: int | None = Field(None, gt=0)
    """Training tokens (task `pretrain`: steps = ceil(tokens / (global_batch × sequence
    length)), so variants with other packing see the same number of tokens)."""
    seconds: float | None = Field(None, gt=0)
    """A cap on the training time, beside one of the above: training ends after the first step
    that finishes past it (a resumed run's earlier time counted). The schedule is laid out over
    the steps of the budget, so a run the cap cut short did not finish its decay, and says so;
    on another machine the same cap trains another number of steps."""

    @model_validator(mode="after")
    def _exactly_one(self) -> Budget:
        given = [k for k in ("steps", "epochs", "tokens") if getattr(self, k) is not None]
        if len(given) != 1:
            cap = "; seconds caps the time of any of them" if self.seconds else ""
            raise ValueError(
                "give exactly one of steps or epochs (or tokens, for task pretrain); "
                f"got {' and '.join(given) or 'none'}{cap}"
            )
        return self


class TrainingSpec(_Section):
    optimizer: Literal["adamw"] = "adamw"
    lr: float = Field(5e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    schedule: Literal["constant", "linear", "cosine", "wsd"] = "linear"
    """wsd: warmup-stable-decay (constant after warmup, then a linear decay to zero over the
    last `decay_fraction` of the steps)."""
    decay_fraction: float = Field(0.2, gt=0, le=1)
    """Share of the steps in the final decay of the wsd schedule."""
    warmup_steps: int = Field(0, ge=0)
    global_batch: int = Field(16, gt=0)
    """Examples per optimizer step."""
    microbatch: int = Field(8, gt=0)
    """Examples per forward/backward; accumulation = global_batch / microbatch."""
    budget: Budget = Budget(epochs=1)
    seed: int = 0
    """Draws the new weights (a head, LoRA's A matrices, a scratch model), the data order and
    dropout's masks; two runs that differ only here are two draws of one arm."""
    replicates: int = Field(1, ge=1, le=64)
    """How many seeds `tunelab run` and `tunelab ablate` train of each variant (`--seeds N`
    says the same on the command line): this seed first, then seeds derived from it
    (`tunelab.core.replicates`). Two or more give each variant a seed-aware interval."""
    max_grad_norm: float | None = Field(1.0, gt=0)
    checkpoint_every: int | None = Field(None, gt=0)
    """Save a resumable checkpoint every N steps (one is always saved on Ctrl-C or SIGTERM)."""
    validate_every: int | None = Field(None, gt=0)
    """Measure the validation loss every N steps (and at the last): the loss the trainer
    minimises, teacher-forced on the validation split (a forward pass, no generation), in the
    run's history and drawn in the report beside the training loss. None: the validation
    split is read once, at the end, for the metrics."""
    overfit_patience: int = Field(3, ge=2)
    """The overfitting warning fires when the validation loss rose at this many measurements
    in a row while the training loss fell."""
    keep: Literal["last", "best"] = "last"
    """The weights the run keeps and is evaluated with: the last step's, or the step with the
    lowest validation loss (needs `validate_every`; the run records the step it kept). The
    test split is never read for it."""
    precision: Literal["fp32", "bf16", "auto"] = "fp32"
    """bf16 uses autocast; weights stay in model.dtype. auto: bf16 where the device computes
    it natively (a CUDA GPU that supports it; a CPU with AMX or AVX512-BF16) and a measured
    bf16 matmul beats fp32's, else fp32; the run records the choice, its reason and the
    measurement (`training.precision` of the run record; `tunelab check` shows it)."""
    strategy: Literal["ddp", "fsdp"] = "ddp"
    """How several processes started by `torchrun` share the training; each takes its share of
    every global batch. `ddp`: each holds a full replica, gradients all-reduced once a step.
    `fsdp` (FSDP2): each holds a shard of every block's weights, gradients and optimizer state,
    gathered block by block when used. One process ignores it."""
    activation_checkpointing: bool = False
    """Recompute activations in the backward pass (non-reentrant): less memory, more time,
    the same gradients. `tunelab size` measures its effect."""
    threads: int | None = Field(None, gt=0)
    """CPU threads for torch's kernels (`torch.set_num_threads`); None keeps torch's default
    (one per core). A speed lever, recorded in the environment."""
    compile: bool = False
    """Train through `torch.compile(model, dynamic=True)` (the model itself is saved and
    evaluated uncompiled). Pays a compilation on the first steps; a speed lever."""
    group_by_length: bool = False
    """Within each global batch, order the examples by length before cutting microbatches, so
    each pads less. The same examples per optimizer step and the same summed loss; only the
    padding and the microbatches' composition (dropout's draws) change. Wins only with
    accumulation (global_batch > microbatch) and lengths that vary."""
    packing: bool = False
    """Causal-LM tasks: each microbatch goes in as one padding-free row, its examples end to
    end with position ids restarting at each one, so no token attends across an example
    (transformers builds the block-diagonal mask from the restarts). The same loss as padded
    rows, without computing the padding."""

    @model_validator(mode="after")
    def _divisible(self) -> TrainingSpec:
        if self.keep == "best" and self.validate_every is None:
            raise FieldError(
                "keep",
                "keep: best chooses the step with the lowest validation loss; set "
                "validate_every (steps between measurements) too",
            )
        if self.global_batch % self.microbatch:
            raise FieldError(
                "microbatch",
                f"global_batch ({self.global_batch}) must be a multiple of microbatch "
                f"({self.microbatch})",
            )
        return self

    @property
    def accumulation(self) -> int:
        return self.global_batch // self.microbatch


class EvaluationSpec(_Section):
    split: Literal["validation"] = "validation"
    """Variants are compared on validation; the test split is opened only by `final`."""
    batch_size: int = Field(32, gt=0)
    max_new_tokens: int = Field(128, gt=0)
    """Generation limit for generative tasks (greedy decoding with the KV cache)."""


class RentalSpec(_Section):
    days: Literal[3, 7, 30] = 7
    device: str = "cpu"
    price_per_hour: float | None = Field(None, ge=0, allow_inf_nan=False)


def recorded_rules(spec: dict) -> dict:
    """The hypothesis and guardrails a spec (as a record holds it, or as `model_dump` writes
    it) states, read through their models: fields added since (a guardrail's `on`) come at
    their defaults, so a field's arrival is no change of rules. What `compare` judges by."""
    hypothesis = spec.get("hypothesis")
    return {
        "hypothesis": Hypothesis(**hypothesis).model_dump(mode="json") if hypothesis else None,
        "guardrails": [
            Guardrail(**g).model_dump(mode="json") for g in spec.get("guardrails") or []
        ],
    }
