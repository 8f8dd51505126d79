"""The spec's section for multi-label classification (`task: multilabel`) and its checks
across sections.

A multi-label example has a *set* of labels (none, one or several apply), so the model is an
encoder with one sigmoid per label rather than one softmax over them. The rows give the set as
a JSON list of strings, or as one string split on `separator` (a CSV column such as
`sport|politics`). The checks here refuse what the lab could not train before any row is read:
a causal model (there is no label-set scoring for one yet), a folder source (its folder name is
one label per text), and a label that holds the separator (no split could ever produce it).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import model_validator

from tunelab.core.section_base import FieldError, _Section


class MultilabelTask(_Section):
    type: Literal["multilabel"] = "multilabel"
    labels: list[str] | None = None
    """The labels in a fixed order (each one a sigmoid of the head); inferred (sorted) from the
    data when left out. A row's label that is not among them is quarantined (`unknown_label`)."""
    separator: str | None = None
    """Splits a label field that is a string into its labels (e.g. `|` for `sport|politics`);
    each piece is stripped, and an empty string is the empty set. Left out, the label field
    must be a list (a JSON list, also when a CSV cell holds one: `["sport", "politics"]`)."""

    generative: ClassVar[bool] = False
    needs_target: ClassVar[bool] = False

    @model_validator(mode="after")
    def _labels_make_sense(self) -> MultilabelTask:
        if self.separator is not None and not self.separator.strip():
            raise FieldError(
                "separator", "a separator of only whitespace splits nothing reliably; use | or ;"
            )
        if self.labels is None:
            return self
        if len(self.labels) < 2:
            raise FieldError(
                "labels",
                f"{len(self.labels)} label(s) listed: a multilabel head needs two or more (for "
                "one tag, yes or no, use task classification with labels [TAG, other]); leave "
                "task.labels out to take them from the data",
            )
        stripped = [label.strip() for label in self.labels]
        if any(not label for label in stripped):
            raise FieldError("labels", "a label is empty")
        twice = sorted({label for label in stripped if stripped.count(label) > 1})
        if twice:
            raise FieldError("labels", f"{twice} listed more than once")
        if self.separator is not None:
            holding = [label for label in stripped if self.separator in label]
            if holding:
                raise FieldError(
                    "labels",
                    f"{holding} contain the separator {self.separator!r}: no split of a row's "
                    "labels can give them; choose another separator",
                )
        self.labels = stripped
        return self


def check_multilabel(spec) -> None:
    """The checks across sections that `task: multilabel` needs (`tunelab.core.spec.Spec`);
    each FieldError names its field."""
    if spec.task.type != "multilabel":
        return
    if spec.model.kind == "causal":
        raise FieldError(
            "model.kind",
            "task multilabel trains an encoder with one sigmoid per label; a causal model "
            "cannot score label sets yet. Use model.kind: auto (or encoder) and an encoder base",
        )
    for i, source in enumerate(spec.data.sources):
        if source.type in ("folder", "image_folder"):
            raise FieldError(
                f"data.sources.{i}.type",
                f"a source of type {source.type} gives each file one label (its folder), and task "
                "multilabel needs a set of labels per row: use jsonl, csv, parquet or "
                "hf_dataset rows whose label field is a list (or a string with task.separator)",
            )
