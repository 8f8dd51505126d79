"""The command line: one subcommand per stage, each mapped to one library function.

No logic lives here: each command declares its arguments beside the function that calls its
stage; `main` parses, calls, prints the result (human view or `--json`) and sets the exit code.
Stages and views are imported only when their command runs, so `tunelab --help` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunelab.core.errors import TrainingInterrupted, TunelabError

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
DEBUG_VARIABLE = "TUNELAB_DEBUG"


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
    device: bool = False
    """Takes `--device` (default: TUNELAB_DEVICE, else CUDA when present, else CPU)."""


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str, view: str | None, *args, **flags) -> Callable:
    def register(fn: Callable) -> Callable:
        COMMANDS[name] = Command(help, fn, view, args, **flags)
        return fn

    return register


# --- helpers the commands share ------------------------------------------------------------------


def _lab(args: argparse.Namespace):
    from tunelab.core.lab import open_lab
    from tunelab.core.spec import parse_overrides

    overrides = parse_overrides(getattr(args, "overrides", None) or [])
    return open_lab(args.lab, overrides, getattr(args, "device", None))


def _progress(args: argparse.Namespace):
    """Progress bars go to stderr, only on a terminal and never with --json."""
    from rich.console import Console

    err = Console(stderr=True)
    return None if args.json or not err.is_terminal else err


# --- the commands, in the order a lab uses them --------------------------------------------------


@command(
    "init",
    "write a commented starting spec",
    "data:init",
    arg("--task", default="classification", help="task type of the template"),
    arg("--force", action="store_true", help="overwrite an existing tunelab.yaml"),
)
def cmd_init(args):
    from tunelab.stages.init import init_lab

    return init_lab(args.lab, args.task, args.force)


@command(
    "data",
    "load, validate, clean, split, deduplicate and version data",
    "data:data",
    overrides=True,
)
def cmd_data(args):
    from tunelab.data import build_data

    lab = _lab(args)
    return build_data(lab.spec, lab.path, lab.store)


@command(
    "inspect",
    "show examples exactly as the trainer sees them",
    "inspect:inspect",
    arg("--sample", type=int, default=2, help="examples per category (default 2)"),
    arg("--split", default="train", choices=["train", "validation"]),
    overrides=True,
)
def cmd_inspect(args):
    from tunelab.stages.inspection import inspect_lab

    return inspect_lab(_lab(args), args.sample, args.split)


@command(
    "baseline",
    "evaluate the starting points on validation",
    "runs:baseline",
    overrides=True,
    device=True,
)
def cmd_baseline(args):
    from tunelab.stages.baseline import run_baseline

    return run_baseline(_lab(args), _progress(args))


@command(
    "check",
    "preflight on a slice: wiring, updates, reload, backend",
    "check:check",
    arg("--rows", type=int, default=16, help="train and validation rows in the slice (default 16)"),
    overrides=True,
    device=True,
)
def cmd_check(args):
    from tunelab.stages.check.steps import run_check

    return run_check(_lab(args), _progress(args), args.rows)


@command(
    "size",
    "measure a training step's memory beside the estimate",
    "size:size",
    arg("--seq-len", type=int, help="tokens per example (default: p95 of train)"),
    arg("--microbatch", type=int, help="default: the spec's training.microbatch"),
    arg(
        "--memory-limit",
        type=float,
        metavar="MIB",
        help="memory budget for the largest microbatch on CPU (default: available memory)",
    ),
    overrides=True,
    device=True,
)
def cmd_size(args):
    from tunelab.stages.size.measure import run_size

    return run_size(_lab(args), args.seq_len, args.microbatch, args.memory_limit, _progress(args))


@command(
    "run",
    "train one variant and evaluate it",
    "runs:run",
    arg("--name", help="run name (default: the method)"),
    arg("--parent", help="run this variant descends from (default: the newest baseline)"),
    arg("--reason", help="why more than one parameter group changes against the parent; recorded"),
    arg(
        "--allow-warnings",
        metavar="REASON",
        help="train despite blocking inspect findings; the reason is recorded",
    ),
    overrides=True,
    device=True,
)
def cmd_run(args):
    from tunelab.stages.run.variant import run_variant

    return run_variant(
        _lab(args), args.name, _progress(args), args.allow_warnings, args.parent, args.reason
    )


@command(
    "ablate",
    "one variant per value of one parameter",
    "runs:ablation",
    arg("assignment", metavar="KEY=V1,V2,...", help="e.g. training.lr=1e-4,5e-4 or method.r=4,16"),
    arg("--parent", help="common parent (default: newest baseline)"),
    device=True,
)
def cmd_ablate(args):
    from tunelab.stages.run.ablate import run_ablation

    return run_ablation(args.lab, args.assignment, args.parent, _progress(args), args.device)


@command(
    "compare",
    "every run beside the baseline, with verdicts",
    "compare:compare",
    arg("--against", help="reference run id (default: best baseline)"),
    arg("--reason", help="compare runs recorded under other hypothesis or guardrails; recorded"),
    arg(
        "--accept-unresolved",
        metavar="REASON",
        help="let an unresolved guardrail pass for `improved`; the reason is recorded",
    ),
    overrides=True,
)
def cmd_compare(args):
    from tunelab.core.spec import parse_overrides
    from tunelab.stages.compare.verdicts import compare

    overrides = parse_overrides(args.overrides)
    return compare(_lab(args), args.against, args.reason, args.accept_unresolved, overrides)


@command(
    "resume",
    "continue an interrupted run from its checkpoint",
    "runs:run",
    arg("run", help="run id, e.g. r003-lora"),
    device=True,
)
def cmd_resume(args):
    from tunelab.stages.run.variant import resume_run

    return resume_run(args.lab, args.run, _progress(args), args.device)


@command(
    "invalidate",
    "mark a run invalid, with the reason",
    "runs:invalidated",
    arg("run", help="run id"),
    arg("--why", required=True, help="what makes it invalid"),
)
def cmd_invalidate(args):
    from tunelab.core.ledger import invalidate
    from tunelab.core.store import Store

    return invalidate(Store(args.lab), args.run, args.why)


@command(
    "final",
    "open the sealed test split once for a chosen run",
    "compare:final",
    arg("run", help="the chosen run id, e.g. r004-lora"),
    arg("--reason", help="required after the first opening of the test split; recorded"),
    device=True,
)
def cmd_final(args):
    from tunelab.stages.final import run_final

    return run_final(_lab(args), args.run, args.reason)


@command(
    "export",
    "write the handover bundle of a run, bound to its exact base model",
    "export:export",
    arg("run", help="the run to hand over, e.g. r004-lora"),
    arg("--out", type=Path, help="bundle folder (default: bundles/RUN in the lab)"),
    arg("--merge", action="store_true", help="also fold the LoRA into merged weights (checked)"),
    device=True,
)
def cmd_export(args):
    from tunelab.stages.export.bundle import export_run

    return export_run(_lab(args), args.run, args.out, args.merge)


@command(
    "verify",
    "reload a bundle in a fresh process and reproduce its predictions",
    "export:verify",
    arg("bundle", type=Path, help="the bundle folder"),
    arg("--base", type=Path, help="the base model (default: the path recorded in the bundle)"),
    lab=False,
    device=True,
)
def cmd_verify(args):
    from tunelab.stages.export.verify import verify_bundle

    return verify_bundle(args.bundle, args.base, args.device or "cpu")


@command("runs", "list the runs of the lab", "runs:runs")
def cmd_runs(args):
    from tunelab.core.ledger import summary
    from tunelab.core.store import Store

    store = Store(args.lab)
    return [summary(r, store.runs_dir / r["id"]) for r in store.runs()]


@command(
    "demo",
    "run the embedded default lab end to end",
    None,
    arg("task", nargs="?", default="classification"),
    arg("--dir", type=Path, default=None, help="lab folder (default demo-lab/TASK)"),
    lab=False,
)
def cmd_demo(args):
    from tunelab.demo import run_demo
    from tunelab.views.style import console

    return run_demo(args.task, args.dir, console(), quiet=args.json)


# --- parsing, running, exit codes ----------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tunelab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, cmd in COMMANDS.items():
        p = sub.add_parser(name, help=cmd.help, description=cmd.help)
        p.set_defaults(command=name)
        p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
        p.add_argument(
            "--debug",
            action="store_true",
            help=f"print the traceback of an internal error (or set {DEBUG_VARIABLE}=1)",
        )
        if cmd.lab:
            p.add_argument("--lab", type=Path, default=Path("."), help="lab folder (default .)")
        if cmd.device:
            p.add_argument(
                "--device",
                help="cpu, cuda or cuda:N (default: TUNELAB_DEVICE, else CUDA when present)",
            )
        for flags, options in cmd.args:
            p.add_argument(*flags, **options)
        if cmd.overrides:
            p.add_argument(
                "overrides",
                nargs="*",
                metavar="key=value",
                help="override spec fields for this command, e.g. training.lr=1e-4",
            )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cmd = COMMANDS[args.command]
    _quiet_libraries()
    try:
        result = cmd.run(args)
    except (KeyboardInterrupt, TrainingInterrupted) as err:
        _error(
            args,
            f"interrupted ({err or 'Ctrl-C'}); the run is recorded as interrupted: "
            "`tunelab resume RUN` continues it.",
        )
        return EXIT_INTERRUPTED
    except TunelabError as err:  # input the user can fix: one line, exit 2
        _error(args, str(err))
        return EXIT_USAGE
    except Exception as err:  # a bug or a broken environment: say so, traceback on request
        debug = args.debug or os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")
        if debug:
            import traceback

            traceback.print_exc()
        hint = "" if debug else f" (rerun with --debug or {DEBUG_VARIABLE}=1 for the traceback)"
        _error(args, f"internal error: {type(err).__name__}: {err}{hint}", internal=True)
        return EXIT_FAIL
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False, default=str))
    elif cmd.view:
        from tunelab.views.style import console

        module, function = cmd.view.split(":")
        getattr(importlib.import_module(f"tunelab.views.{module}"), function)(result, console())
    # a result that says it did not pass (a failed `check`) exits 1, after it is shown
    return EXIT_FAIL if isinstance(result, dict) and result.get("passed") is False else EXIT_OK


def _error(args: argparse.Namespace, message: str, internal: bool = False) -> None:
    if args.json:
        print(json.dumps({"error": message, "command": args.command, "internal": internal}))
        return
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True).print(
        f"[bold red]error[/] ({args.command}): {escape(message)}", highlight=False
    )


# Deprecation notices raised inside transformers and PEFT by calls tunelab does not make
# itself; each is filtered by its own text, every other warning still shows.
KNOWN_WARNINGS = (
    r"`is_gradient_checkpointing` is deprecated",
    r"`past_key_values` is deprecated",
)


def _quiet_libraries() -> None:
    """transformers warns about long inputs that tunelab truncates on purpose; keep it quiet,
    and filter the known third-party deprecation notices (KNOWN_WARNINGS) by their text."""
    import warnings

    for message in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=FutureWarning)
    if "transformers" not in sys.modules:  # read when a stage first imports it
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        return
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


if __name__ == "__main__":
    sys.exit(main())
