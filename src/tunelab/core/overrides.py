"""`key=value` overrides of a spec on the command line: each value read as YAML, set into a
copy of the raw spec by its dotted key before the spec is validated (`spec.load_spec`)."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from tunelab.core.errors import SpecError
from tunelab.core.spec_yaml import load_yaml


def parse_value(raw: str) -> Any:
    """A command-line value read as YAML, with `1e-4` taken as the number YAML 1.1 misses.

    A mapping or list counts only when written in brackets (`{a: 1}`, `[q_proj, v_proj]`): a
    text that YAML alone reads as one (`task.regex=ANSWER: (` is the mapping `{ANSWER: (}`) or
    cannot read at all (`ANSWER: [`) is kept as the text it is, and so is one that starts as
    a block scalar (`task.separator=|` read as the empty text).
    """
    text = raw.strip()
    if not text:
        return ""
    if text[0] in "|>":  # YAML's block scalars: on one line, `|` read as the empty text
        return raw
    bracketed = text[0] in "[{"
    try:
        value = load_yaml(raw)
    except yaml.YAMLError:
        if bracketed:
            raise
        return raw
    if isinstance(value, dict | list) and not bracketed:
        return raw
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`a.b=1` -> {"a.b": 1}; the value is read as YAML (numbers, booleans, lists)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise SpecError(f"override {item!r}: expected key=value, e.g. training.lr=1e-4")
        try:
            out[key.strip()] = parse_value(raw)
        except yaml.YAMLError as err:
            problem = getattr(err, "problem", None) or "not valid YAML"
            raise SpecError(
                f"override {item!r}: the value is not a YAML list or mapping ({problem}); "
                "close its brackets, or quote the whole value to give it as text"
            ) from None
    return out


BUDGET_UNITS = frozenset({"steps", "epochs", "tokens"})
"""`training.budget` gives exactly one of these."""


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Set dotted keys in a copy of the raw spec; list items are addressed by index.

    Changing a section's `type` (e.g. `method.type=full`) keeps only the options the new type
    also takes (a classifier's `head_init`, so LoRA against full fine-tuning is that one
    change): the old type's others (a LoRA rank) mean nothing to the new one. A budget is one
    unit, so
    `training.budget.steps=20` replaces the file's `epochs` (two units overridden together are
    still refused).
    """
    data = copy.deepcopy(raw)
    for dotted, value in overrides.items():
        node: Any = data
        parts = dotted.split(".")
        for part in parts[:-1]:
            node = _child(node, part, dotted)
        last = parts[-1]
        if not isinstance(node, dict | list):  # `training.lr.x=1`: below a plain value
            raise SpecError(
                f"override {dotted!r}: {'.'.join(parts[:-1])} is a value ({node!r}), not a "
                "section: nothing goes below it"
            )
        if last == "type" and isinstance(node, dict) and node.get("type") != value:
            shared = _options_of(parts[:-1], value)
            for option in [k for k in node if shared is not None and k not in shared]:
                del node[option]
        if dotted.rpartition(".")[0] == "training.budget" and isinstance(node, dict):
            for unit in BUDGET_UNITS - {last} if last in BUDGET_UNITS else ():
                if f"training.budget.{unit}" not in overrides:
                    node.pop(unit, None)
        if isinstance(node, list):
            node[_index(last, dotted, len(node))] = value
        else:
            node[last] = value
    return data


def _options_of(path: list[str], kind: Any) -> set[str] | None:
    """The options the typed section at `path` takes as type `kind` (none for a type it does not
    know: the spec's check names it); None where `type` picks no section of its own (a data
    source's type: its path and name stay)."""
    from tunelab.core.origin import fields, section_models
    from tunelab.core.spec import Spec  # spec.py imports this module

    typed = False
    for model in section_models(Spec, path):
        tag = model.model_fields.get("type")
        if tag is not None and tag.default == kind:
            return fields(model) - {"type"}
        typed = typed or (tag is not None and isinstance(tag.default, str))
    return set() if typed else None


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
