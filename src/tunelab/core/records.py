"""The declared shape of every record kind in the store, checked when written and when read.

Each kind is a pydantic model of the keys every reader relies on, with their types; a record may
carry more (a stage's own details), and a key means the same in every kind that has it:

- `kind` of a run is what made it (`baseline`, `variant`); the model's kind is `model_kind`
  (a sizing record's `model.model_kind`);
- `method` of a run is the method's name (`lora`, `probe`); the method's settings live in its
  `spec`;
- `created` is when the record was first written (UTC, ISO 8601); `file` is its path relative to
  the lab.

`Store.save` and `Store.load` call `check_record`, which picks the shape from the record's path
in the store (`runs/*/record.json`, `comparisons/c*.json`...). A record that does not fit is a
StoreError naming the file and the field: a bug in a writer, or an edit by hand.
"""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import PurePath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

RUN_STATES = Literal["running", "completed", "interrupted", "failed", "invalid"]


class Shape(BaseModel):
    model_config = ConfigDict(extra="allow")


class Weights(Shape):
    dir: str
    files: list[str]
    sha256: dict[str, str] | None = None
    """Each file's sha256 (store format 2): `tunelab fsck` checks the bytes against it."""


class Run(Shape):
    id: str
    kind: Literal["baseline", "variant"]
    status: RUN_STATES
    updated: str
    data_version: str
    spec: dict[str, Any]
    name: str | None = None
    task: str | None = None
    created: str | None = None
    method: str | None = None
    metrics: dict[str, Any] | None = None
    weights: Weights | None = None
    predictions_sha256: str | None = None
    preprocessing: dict[str, Any] | None = None
    """An image lab's: what the base's image processor does to every image (`modeling.pixels`)."""


class ComparisonInput(Shape):
    run: str
    predictions_sha256: str


class Comparison(Shape):
    id: str
    created: str
    file: str
    inputs: list[ComparisonInput]
    runs: list[dict[str, Any]]
    reference: str | None


class Member(Shape):
    index: int
    seed: int
    run: str | None
    trained: bool


class Group(Shape):
    id: str
    kind: Literal["replicates", "noise"]
    name: str
    created: str
    base_seed: int
    seeds: list[int]
    members: list[Member]


class Noise(Shape):
    id: str
    created: str
    file: str
    of: str
    group: str


class Plan(Shape):
    id: str
    created: str
    file: str
    days: int
    device: str
    phases: list[dict[str, Any]]


class Final(Shape):
    n: int
    run: str
    data_version: str
    test_sha256: str
    file: str
    metrics: dict[str, Any]


class Export(Shape):
    run: str
    bundle: str
    file: str
    created: str
    verified: dict[str, Any] | None = None


class Check(Shape):
    passed: bool
    items: list[dict[str, Any]]
    data_version: str
    spec_hash: str
    file: str
    created: str


class SizedModel(Shape):
    path: str | None  # None: a model built from scratch (model.arch)
    dtype: str
    model_kind: str


class Sizing(Shape):
    data_version: str
    spec_hash: str
    model: SizedModel
    created: str
    file: str


SHAPES: dict[str, type[Shape]] = {
    "runs/*/record.json": Run,
    "comparisons/c*.json": Comparison,
    "groups/g*.json": Group,
    "noise/n*.json": Noise,
    "plans/p*.json": Plan,
    "finals/*.json": Final,
    "exports/*.json": Export,
    "checks/*.json": Check,
    "sizing/*.json": Sizing,
}
"""Each record kind's place in the store (a pattern relative to `.tunelab/`) and shape."""


def shape_of(relative: PurePath) -> type[Shape] | None:
    """The declared shape of the record at `relative` (to the store's root), or None."""
    text = relative.as_posix()
    return next((shape for pattern, shape in SHAPES.items() if fnmatch(text, pattern)), None)


def check_record(relative: PurePath, record: dict) -> None:
    """Refuse a record that does not fit its declared shape, naming the file and the fields."""
    shape = shape_of(relative)
    if shape is None:
        return
    try:
        shape.model_validate(record)
    except ValidationError as err:
        from tunelab.core.store import StoreError

        fields = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(the record)'}: {e['msg']}" for e in err.errors()
        )
        raise StoreError(
            f".tunelab/{relative.as_posix()}: not a {shape.__name__.lower()} record as this "
            f"tunelab writes them ({fields}). If it was edited by hand, restore it from a "
            "backup; `tunelab fsck` checks the whole lab."
        ) from None
