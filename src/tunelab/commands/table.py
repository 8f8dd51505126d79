"""What a command is: its help, arguments and flags beside the one function that calls its
stage, registered in `COMMANDS` by the `command` decorator."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def arg(*flags: str, **options: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    """One argparse argument, declared beside the command that takes it."""
    return flags, options


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
