"""What a command is: its help, arguments and flags beside the one function that calls its
stage, registered in `COMMANDS` by the `command` decorator."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def arg(*flags: str, **options: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    """One argparse argument, declared beside the command that takes it."""
    return flags, options


def positive(text: str) -> int:
    """A count on the command line that must be above 0 (`--rows 0` made a check of no rows,
    `--microbatch 0` measured the spec's own microbatch)."""
    return _whole(text, 1)


def count(text: str) -> int:
    """A count that may be 0 (`inspect --sample 0`: the findings without examples), never
    below (`--sample -3` showed nothing and reported no findings)."""
    return _whole(text, 0)


def amount(text: str) -> float:
    """A finite number not below 0 (a price): `nan` and `inf` parse as floats and had crashed
    the plan, or written NaN into its record and the event log."""
    return _finite(text, above_zero=False)


def rate(text: str) -> float:
    """A finite number above 0 (a throughput the plan divides by)."""
    return _finite(text, above_zero=True)


def _finite(text: str, above_zero: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0 or (above_zero and value == 0):
        least = "above 0" if above_zero else "of 0 or more"
        raise argparse.ArgumentTypeError(f"{text} is not a finite number {least}")
    return value


def _whole(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{text} is {'not above 0' if least else 'below 0'}")
    return value


@dataclass(frozen=True)
class Command:
    help: str
    run: Callable[[argparse.Namespace], Any]
    view: str | None
    """`module:function` under tunelab.views that prints the result for a person."""
    args: tuple = ()
    lab: bool = True
    """Takes `--lab` (the lab folder)."""
    overrides: bool = False
    """Takes `key=value` spec overrides."""
    no_overrides: str = ""
    """Where it takes none, what its refusal of a `key=value` adds (ablate: where the others go)."""
    device: bool = False
    """Takes `--device` (default: TUNELAB_DEVICE, else CUDA when present, else CPU)."""
    processes: bool = False
    """Runs under `torchrun` as several processes (the others are refused there)."""


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str, view: str | None, *args, **flags) -> Callable:
    def register(fn: Callable) -> Callable:
        COMMANDS[name] = Command(help, fn, view, args, **flags)
        return fn

    return register
