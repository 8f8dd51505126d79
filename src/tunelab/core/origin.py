"""Where a spec value comes from: the file's line or the command-line override, for the
spec's validation errors (`problems`) and for any other message about a field (`origin_of`).
"""

from __future__ import annotations

import difflib
import functools
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from tunelab.core.section_base import FieldError


def problems(
    err: ValidationError,
    path: Path | str,
    text: str,
    overrides: dict[str, Any],
    model: type[BaseModel] | None = None,
) -> str:
    """Each problem: where it comes from, the dotted field, what is wrong; for a field `model`
    (the spec's class) does not have, the one it most likely meant. One problem is said in one
    line, several in one line each under a heading."""
    count = err.error_count()
    source = f"{path} with the command-line overrides" if overrides else f"{path}"
    root = yaml.compose(text) if text else None
    found = []
    for e in err.errors():
        loc, scope = _error_loc(e)
        field = ".".join(loc) or "(top level)"
        where = _origin(loc, root, overrides, scope)
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden" and model is not None:
            tags = [str(part) for part in e["loc"] if _is_union_tag(part)]
            msg += _meant(model, loc, tags[-1] if tags else None)
        found.append(f"{where + ', ' if where else ''}field `{field}`: {msg}")
    if count == 1:
        return f"{source}: the spec is not valid: {found[0]}"
    return "\n".join(
        [f"{source}: the spec is not valid ({count} problems):"] + [f"  - {f}" for f in found]
    )


ELSEWHERE = {
    "learning_rate": ("lr", ""),
    "num_train_epochs": ("budget.epochs", ""),
    "epochs": ("budget.epochs", ""),
    "max_steps": ("budget.steps", ""),
    "steps": ("budget.steps", ""),
    "per_device_train_batch_size": ("microbatch", " (examples per forward and backward pass)"),
    "gradient_accumulation_steps": (
        "global_batch",
        " (examples per optimizer step; accumulation = global_batch / microbatch, derived)",
    ),
    "lr_scheduler_type": ("schedule", ""),
    "warmup": ("warmup_steps", ""),
    "gradient_checkpointing": ("activation_checkpointing", ""),
    "bf16": ("precision", " (fp32, bf16 or auto)"),
    "fp16": ("precision", " (fp32, bf16 or auto)"),
    "lora_alpha": ("alpha", ""),
    "lora_dropout": ("dropout", ""),
    "rank": ("r", ""),
    "lora_r": ("r", ""),
    "model_name_or_path": ("path", " (a local folder: nothing is downloaded)"),
}
"""What other trainers (transformers' TrainingArguments, PEFT's LoraConfig) call a field, by
tunelab's name for it in the same section, and a note where the two do not mean the same."""


def _meant(model: type[BaseModel], loc: list[str], tag: str | None = None) -> str:
    """`; did you mean `training.lr`?` for an unknown field `training.lrr`, or the fields its
    section takes when none is close; nothing when the section cannot be found. Under a tagged
    union (`tag`: the member the spec chose, `method.type: full`), the fields of that member,
    and a field of another member is said to be that member's."""
    members = section_models(model, loc[:-1])
    chosen = [m for m in members if _tag_of(m) == tag] or members
    known = sorted({name for m in chosen for name in fields(m)})
    if not known:
        return ""
    dotted, section = ".".join(loc), ".".join(loc[:-1])
    owners = [_tag_of(m) for m in members if loc[-1] in fields(m)]
    if tag and owners:
        kinds = " or ".join(f"`{section}.type: {owner}`" for owner in owners)
        return f"; `{dotted}` is a setting of {kinds}, and this spec has `{section}.type: {tag}`"
    other, note = ELSEWHERE.get(loc[-1], ("", ""))
    if other.split(".")[0] in known:
        return f"; tunelab calls it `{'.'.join([*loc[:-1], other])}`{note}"
    close = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
    if close:
        return f"; did you mean `{'.'.join([*loc[:-1], close[0]])}`?"
    return f"; {section or 'the spec'} takes: {', '.join(known)}"


def _tag_of(model: type[BaseModel]) -> str | None:
    """A tagged union member's `type` (`lora`, `classification`), or None."""
    field = model.model_fields.get("type")
    return field.default if field is not None and isinstance(field.default, str) else None


def section_models(model: type[BaseModel], path: list[str]) -> list[type[BaseModel]]:
    """The models the section at `path` can be (list indices skipped; a union, each member)."""
    models = [model]
    for part in path:
        if part.isdigit():
            continue
        models = [
            inner
            for m in models
            if part in m.model_fields
            for inner in _models(m.model_fields[part].annotation)
        ]
    return models


def fields(model: type[BaseModel]) -> set[str]:
    """A section's field names, as a spec writes them (aliases)."""
    return {f.alias or name for name, f in model.model_fields.items()}


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's annotation can hold: itself, a union's members, a list's
    or a dict's items."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _error_loc(error: dict) -> tuple[list[str], list[str]]:
    """The path of the field a pydantic error is about (union tags left out, a bad `type` tag
    pointed at `type`) and the scope of the check: for a cross-field check (FieldError), the
    section whose fields it reads; else the field itself."""
    loc = [str(p) for p in error["loc"] if not _is_union_tag(p)]
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, FieldError):
        return loc + cause.field.split("."), loc
    if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
        return [*loc, "type"], loc
    return loc, loc


def _is_union_tag(part: Any) -> bool:
    return part in _union_tags()


@functools.cache
def _union_tags() -> frozenset[str]:
    """The `type` of every member of the spec's tagged unions (the task and the method), which
    pydantic puts in an error's path: read off the unions, so a task added later is one too."""
    from tunelab.core.sections import MethodSpec, TaskSpec

    members = [
        m for union in (TaskSpec, MethodSpec) for m in typing.get_args(typing.get_args(union)[0])
    ]
    return frozenset(m.model_fields["type"].default for m in members)


def _origin(
    loc: list[str],
    root: Any,
    overrides: dict[str, Any],
    scope: list[str] | None = None,
    exact: bool = False,
) -> str:
    """Where the value at `loc` comes from: `key=value (command line)` when an override set
    it (or a section above it), else its line in the file (with `exact`, only a line of `loc`
    itself; else the deepest key of it there is), with the overrides inside `scope` (the
    section a cross-field check reads; default `loc`) that share the blame."""
    above = [k for k in overrides if loc[: len(k.split("."))] == k.split(".")]
    if above:
        key = max(above, key=len)
        return f"{key}={_show(overrides[key])} (command line)"
    scope = loc if scope is None else scope
    inside = [
        f"{k}={_show(v)}" for k, v in overrides.items() if k.split(".")[: len(scope)] == scope
    ]
    line = _line_of(root, loc, exact=exact or bool(inside))  # a section only overrides wrote
    where = f"line {line}" if line else ""
    if inside:
        where += (", " if where else "") + f"with {', '.join(inside)} (command line)"
    return where


def origin_of(field: str, path: Path, overrides: dict[str, Any] | None = None) -> str:
    """Where a spec field's value comes from, for a message about it: `tunelab.yaml line 12`,
    `method.r=4 (command line)`, or `the default` when neither sets it."""
    path = Path(path)
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    try:
        root = yaml.compose(text) if text else None
    except yaml.YAMLError:
        root = None
    where = _origin(field.split("."), root, overrides or {}, exact=True)
    if where.startswith("line "):
        return f"{path.name} {where}"
    return where or "the default"


def _show(value: Any) -> str:
    """An override's value as the user could have typed it."""
    if isinstance(value, str):
        return value
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    return text.removesuffix("...").strip()


def _line_of(node: Any, loc: list[str], exact: bool = False) -> int | None:
    """The 1-based YAML line of the deepest existing key on the path `loc` (with `exact`:
    of `loc` itself, None when the file does not have it)."""
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if k.value == part), None)
            if match is None:
                return None if exact else line
            key = next(k for k, v in node.value if v is match)
            line, node = key.start_mark.line + 1, match
        elif isinstance(node, yaml.SequenceNode) and part.isdigit() and int(part) < len(node.value):
            node = node.value[int(part)]
            line = node.start_mark.line + 1
        else:
            return None if exact else line
    return line
