"""The sections of the lab spec, each a pydantic model with a docstring per field.

`tunelab.core.spec` assembles them into `Spec` and holds loading, overrides and error reporting.
"""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, model_validator

from tunelab.core.scratch import Arch, Bpe, PretrainTask, check_init
from tunelab.core.section_base import FieldError, _Section


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
    """The largest drop allowed against the baseline (absolute)."""


class ClassificationTask(_Section):
    type: Literal["classification"] = "classification"
    labels: list[str] | None = None
    """The label set in a fixed order; inferred (sorted) from the data when left out."""
    instruction: str = "Which category does this text belong to?"
    """Prompt instruction when a causal LM classifies by scoring each label's text."""

    generative: ClassVar[bool] = False
    needs_target: ClassVar[bool] = False


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

    @model_validator(mode="after")
    def _one_format(self) -> FormatTask:
        if (self.json_schema is None) == (self.regex is None):
            raise ValueError("give exactly one of json_schema or regex")
        return self


TaskSpec = Annotated[
    ClassificationTask | ExtractionTask | FormatTask | PretrainTask, Field(discriminator="type")
]


class Source(_Section):
    type: str
    """Loader name: jsonl, csv, parquet (one file each), folder (one sub-folder per label) or
    hf_dataset (a folder written by `datasets`' `save_to_disk`; a DatasetDict's train,
    validation and test splits are kept as the user's split)."""
    path: str
    """File or folder, relative to the lab folder unless absolute. It must resolve (links
    followed) to a place inside the lab folder unless `data.allow_outside_lab` is true."""
    split: Literal["train", "validation", "test"] | None = None
    """Set when this source already is one split: the user's split is kept as it is. On a
    saved DatasetDict: read only that split of it."""
    name: str | None = Field(None, min_length=1)
    """Name used by `data.mixture` (default: the file or folder name without its extension)."""

    @property
    def source_name(self) -> str:
        return self.name or PurePath(self.path).stem


class Fields(_Section):
    text: str = "text"
    """Column holding the input text."""
    label: str = "label"
    """Column holding the label (classification), or an optional category used to stratify
    and sample generative examples."""
    target: str = "target"
    """Column holding the expected answer (generative tasks): a JSON object or a string."""
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
    near: bool = True
    """Also find near-duplicates (MinHash LSH over word shingles)."""
    threshold: float = Field(0.8, gt=0, le=1)
    """Estimated Jaccard similarity from which two texts count as near-duplicates."""
    shingle: int = Field(3, gt=0)
    """Words per shingle."""
    num_perm: int = Field(128, ge=16)
    """MinHash permutations (more: a finer similarity estimate, slower)."""
    conflicts: Literal["quarantine", "report"] = "quarantine"
    """The same text with different labels (or targets): quarantine every copy, or keep them
    all and only report the conflict."""


class MixtureStage(_Section):
    from_step: int | None = Field(None, ge=0)
    """The optimizer step (counted from 0) from which this stage's weights apply."""
    from_fraction: float | None = Field(None, ge=0, lt=1)
    """Or: the fraction of the run's steps from which they apply."""
    weights: dict[str, float]
    """Sampling weight per source name (relative; 0 leaves a source out)."""

    @model_validator(mode="after")
    def _one_start(self) -> MixtureStage:
        if (self.from_step is None) == (self.from_fraction is None):
            raise ValueError("give exactly one of from_step or from_fraction")
        return self


class Mixture(_Section):
    weights: dict[str, float]
    """Sampling weight per source name from the first step (relative; 0 leaves a source out).
    Every source with training rows must be named."""
    stages: list[MixtureStage] = Field(default_factory=list)
    """Later stages of a curriculum, each with its own weights, in order of their start."""


class DataSpec(_Section):
    sources: list[Source] = Field(min_length=1)
    fields: Fields = Fields()
    cleaning: list[CleaningRule] = Field(default_factory=list)
    split: SplitSpec = SplitSpec()
    dedup: DedupSpec = DedupSpec()
    mixture: Mixture | None = None
    """Sample training batches from the sources by weight instead of uniformly over rows."""
    max_chars: int = Field(100_000, gt=0)
    """A text longer than this is almost always a mistake (a whole file in one field)."""
    long_text: Literal["warn", "quarantine"] = "warn"
    """What to do with a text over `max_chars`: a warning that names its line, or quarantine."""
    missing_label: Literal["warn", "error"] = "warn"
    """A label that has train examples but none in validation (or test): a warning, or an
    error that refuses the data (its scores on that split would be unmeasured)."""
    allow_outside_lab: bool = False
    """Read sources that resolve outside the lab folder (`../x`, an absolute path elsewhere, a
    link that points out). Off, such a path is refused: a lab reads only its own folder."""
    eval_from: str | None = None
    """A data version of this lab whose validation and test splits this version keeps as they
    are (byte for byte, the sealed test included), while train is rebuilt from the sources and
    rules: every example not already in them (by id or text). Change train alone, and runs on
    both versions still pair on the same validation examples."""

    @model_validator(mode="after")
    def _names_and_weights(self) -> DataSpec:
        names = [s.source_name for s in self.sources]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(
                f"source names must be unique, {twice} repeats: give data.sources[i].name"
            )
        if self.mixture is None:
            return self
        tables = [("data.mixture.weights", self.mixture.weights)] + [
            (f"data.mixture.stages[{i}].weights", st.weights)
            for i, st in enumerate(self.mixture.stages)
        ]
        for where, weights in tables:
            unknown = sorted(set(weights) - set(names))
            if unknown:
                raise ValueError(f"{where}: unknown source(s) {unknown}; the sources are {names}")
            if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
                raise ValueError(f"{where}: weights must be >= 0 with a positive sum")
        return self


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
        path = Path(self.path).expanduser()
        return path if path.is_absolute() else lab / path


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

    @model_validator(mode="after")
    def _exactly_one(self) -> Budget:
        given = [k for k in ("steps", "epochs", "tokens") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of steps or epochs (or tokens, for task pretrain); "
                f"got {' and '.join(given) or 'none'}"
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
    max_grad_norm: float | None = Field(1.0, gt=0)
    checkpoint_every: int | None = Field(None, gt=0)
    """Save a resumable checkpoint every N steps (one is always saved on Ctrl-C or SIGTERM)."""
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
    price_per_hour: float | None = Field(None, ge=0)
