"""The table of subcommands: each declares its arguments beside the one function that calls
its stage. Stages and views are imported only when their command runs, so reading this table
(and `tunelab --help`) imports nothing heavy. Parsing, exit codes and errors: `cli.py`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
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


# --- helpers the commands share ------------------------------------------------------------------


def _lab(args: argparse.Namespace, *checks: Callable):
    """The command's lab, with its overrides; `checks` refuse it before any model loads."""
    from tunelab.core.lab import open_lab
    from tunelab.core.spec import parse_overrides

    overrides = parse_overrides(getattr(args, "overrides", None) or [])
    return open_lab(args.lab, overrides, getattr(args, "device", None), checks)


def _records_lab(args: argparse.Namespace):
    """The command's lab without a device, for the commands that only read records."""
    from tunelab.core.lab import open_records_lab
    from tunelab.core.spec import parse_overrides

    return open_records_lab(args.lab, parse_overrides(getattr(args, "overrides", None) or []))


# The checks a command needs before a model loads. Each imports what it uses when it runs, and
# a command opens its lab with them before it imports its stage (which imports torch), so a
# refusal takes well under a second.


def _plan(lab) -> None:
    """A hypothesis and a guardrail: what training is for (`Spec.require_plan`)."""
    lab.spec.require_plan()


def _usable(lab) -> None:
    """The current data version can be trained and evaluated on (read from its manifest)."""
    from tunelab.data.usable import require_usable

    require_usable(lab.store, lab.store.current_data(), lab.spec)


def _targets(lab) -> None:
    """The LoRA targets name modules of the base model (read from its safetensors headers)."""
    from tunelab.modeling.targets import require_targets

    require_targets(lab)


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
    arg(
        "--name",
        help="record the baselines again, as METHOD-NAME (an identical one is otherwise refused)",
    ),
    overrides=True,
    device=True,
)
def cmd_baseline(args):
    lab = _lab(args, _usable)
    from tunelab.stages.baseline import run_baseline

    return run_baseline(lab, _progress(args), args.name)


@command(
    "check",
    "preflight on a slice: wiring, updates, reload, backend",
    "check:check",
    arg("--rows", type=int, default=16, help="train and validation rows in the slice (default 16)"),
    overrides=True,
    device=True,
)
def cmd_check(args):
    lab = _lab(args, _usable)  # a LoRA target matching nothing is an item of the checklist
    from tunelab.stages.check.steps import run_check

    return run_check(lab, _progress(args), args.rows)


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
    arg(
        "--nproc",
        type=int,
        default=1,
        metavar="N",
        help="measure one rank's step among N processes, started under torchrun (default: 1)",
    ),
    arg(
        "--strategy",
        choices=["ddp", "fsdp"],
        help="with --nproc: how the processes share the model (default: training.strategy)",
    ),
    overrides=True,
    device=True,
)
def cmd_size(args):
    lab = _lab(args, _targets, _usable)
    from tunelab.stages.size.measure import run_size

    return run_size(
        lab,
        args.seq_len,
        args.microbatch,
        args.memory_limit,
        _progress(args),
        nproc=args.nproc,
        strategy=args.strategy,
    )


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
    processes=True,
)
def cmd_run(args):
    if args.name is not None:  # a name is refused before anything else is read
        from tunelab.core.store import check_run_name

        check_run_name(args.name)
    lab = _lab(args, _plan, _targets, _usable)
    from tunelab.stages.run.variant import run_variant

    return run_variant(
        lab, args.name, _progress(args), args.allow_warnings, args.parent, args.reason
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
    lab = _records_lab(args)
    from tunelab.stages.compare.verdicts import compare

    return compare(lab, args.against, args.reason, args.accept_unresolved, lab.overrides)


@command(
    "resume",
    "continue an interrupted run from its checkpoint",
    "runs:run",
    arg("run", help="run id, e.g. r003-lora"),
    device=True,
    processes=True,
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
    "plan",
    "lay a 3, 7 or 30 day rental out in phases from what the lab measured",
    "plan:plan",
    arg("--days", type=int, choices=[3, 7, 30], help="rental length (default: rental.days)"),
    arg(
        "--price-per-hour",
        type=float,
        metavar="P",
        help="price of the rental per hour (default: rental.price_per_hour); gives the cost",
    ),
    arg(
        "--device",
        metavar="NAME",
        help="the rental's device, e.g. cuda or H100 (default: rental.device); another device "
        "than the measured one needs --tokens-per-second",
    ),
    arg(
        "--tokens-per-second",
        type=float,
        metavar="T",
        help="training throughput measured on that device; recorded with the plan",
    ),
    overrides=True,
)
def cmd_plan(args):
    lab = _records_lab(args)
    from tunelab.stages.plan.rental import run_plan

    return run_plan(lab, args.days, args.price_per_hour, args.device, args.tokens_per_second)


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


@command(
    "report",
    "write one static HTML page of the whole lab: runs, curves, comparisons, memory, plan",
    "report:report",
    arg("--out", type=Path, help="where to write the page (default: lab-report.html in the lab)"),
)
def cmd_report(args):
    lab = _records_lab(args)
    from tunelab.stages.report.html import write_report

    return write_report(lab, args.out)


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
