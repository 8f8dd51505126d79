"""The `data` section of the lab spec: sources, fields, cleaning, split, dedup and mixture.

Its own module because it is the spec's largest section; `tunelab.core.sections` holds the
others and `tunelab.core.spec` assembles them into `Spec`.
"""

from __future__ import annotations

import math
from pathlib import PurePath
from typing import Literal

from pydantic import ConfigDict, Field, ValidationInfo, model_validator

from tunelab.core.section_base import FieldError, _Section


class Source(_Section):
    type: str
    """Loader name: jsonl, csv, tsv, parquet (one file each), folder (one sub-folder per label) or
    hf_dataset (a folder written by `datasets`' `save_to_disk`; a DatasetDict's train,
    validation and test splits are kept as the user's split). An image lab (task
    image_classification) reads image_folder (one sub-folder of images per label), or jsonl,
    csv, parquet and hf_dataset with an image column (`fields.image`)."""
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
    image: str = "image"
    """Column holding the image (task image_classification): a path relative to the lab
    folder (the rules of a source path apply), or a `datasets.Image` value (bytes)."""
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
    messages: str | None = None
    """Conversations: the column holding a list of `{role, content}` turns (system, user,
    assistant; several turns allowed), e.g. `messages`. The example's answer is its last
    assistant turn; `text` and `target` are not read (a tunelab.yaml that names them beside
    conversations is refused). Needs `model.template: chat`."""
    prompt: str | None = None
    """Prompt/completion rows: the column holding the prompt, a string (one user turn) or a
    list of `{role, content}` turns; with `completion`."""
    completion: str | None = None
    """The column holding the completion: a string (one assistant turn) or a list of turns
    ending on an assistant turn."""

    @model_validator(mode="after")
    def _one_conversation_shape(self, info: ValidationInfo) -> Fields:
        if (self.prompt is None) != (self.completion is None):
            raise FieldError(
                "prompt" if self.prompt is None else "completion",
                "prompt/completion rows need both fields named",
            )
        if self.messages is not None and self.prompt is not None:
            raise FieldError("messages", "name `messages` or `prompt` and `completion`, not both")
        # in the user's own file only: a run's record writes every field back, defaults too
        written = (info.context or {}).get("written", False)
        unread = [f for f in ("text", "target") if f in self.model_fields_set]
        if written and self.conversations and unread:
            raise FieldError(
                unread[0],
                "conversations are read from their turns (the last, the assistant's answer, "
                f"is the target), so `{unread[0]}` would not be read: delete it",
            )
        return self

    @property
    def conversations(self) -> bool:
        """The rows are conversations (`messages`, or prompt/completion)."""
        return self.messages is not None or self.prompt is not None


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
    validation_from_train: float | None = Field(None, gt=0, lt=1)
    """For data that comes already split with no validation rows (a DatasetDict of train and
    test): hold out this share of the user's train split as validation, seeded by `seed`,
    stratified by label if `stratify`, a group kept whole."""

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
    image_hamming: int = Field(6, ge=0, le=32)
    """Images: the largest Hamming distance between two difference hashes (64 bits) at which
    two different pictures count as near-duplicates (0: identical hashes only)."""


class ImagesSpec(_Section):
    max_pixels: int = Field(50_000_000, gt=0)
    """Pillow's decompression-bomb limit (`Image.MAX_IMAGE_PIXELS`), set to this while the
    images are decoded: a larger image is quarantined (image_too_large), not decoded."""


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
    images: ImagesSpec = ImagesSpec()
    """How images are read (task image_classification); recorded in the version's settings."""
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
    texts_in_memory_mb: float | None = Field(None, gt=0)
    """How many MB of the rows' texts the data step holds in memory (default 1024); past it
    they wait in a scratch file of the lab's store and are read back as each step needs them
    (slower, the same answers). Where they were: `tunelab data`'s `cost.texts`."""
    engine: Literal["local", "datatrove"] = "local"
    """What finds near-duplicate texts: `local`, this process and its cores (millions of rows
    on one machine), or HF's `datatrove` MinHash pipeline in stages on disk (its local
    executor here; the same stages run under its Slurm or Ray executors for corpora past one
    machine; `pip install 'tunelab[datatrove]'`). Both find the same pairs up to MinHash noise
    near the threshold."""
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
            if not all(math.isfinite(w) for w in weights.values()):
                odd = sorted(n for n, w in weights.items() if not math.isfinite(w))
                raise ValueError(f"{where}: weights must be finite numbers; {odd} are not")
            if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
                raise ValueError(f"{where}: weights must be >= 0 with a positive sum")
        return self
