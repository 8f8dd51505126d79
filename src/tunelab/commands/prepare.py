"""The commands that prepare a lab: its spec, data, a look at the examples, the baselines, the
preflight and the memory plan."""

from __future__ import annotations

from tunelab.commands.opening import (
    needs_base,
    needs_positions,
    needs_scorable,
    needs_sizable,
    needs_targets,
    needs_usable,
    opened,
    opened_records,
    progress,
)
from tunelab.commands.table import arg, command, count, positive, rate


def _template_tasks() -> list[str]:
    """The tasks `init` has a template for (a listing of the package's templates folder: the
    CLI imports nothing heavy to say them)."""
    from pathlib import Path

    return sorted(p.stem for p in (Path(__file__).parent.parent / "templates").glob("*.yaml"))


@command(
    "init",
    "write a commented starting spec",
    "data:init",
    arg(
        "--task",
        default="classification",
        help=f"task type of the template: {', '.join(_template_tasks())} (default: classification)",
    ),
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
    import resource
    import time

    from tunelab.data import build_data

    lab = opened_records(args)  # no device: the data step needs none, and torch is not loaded
    start = time.perf_counter()
    console = progress(args)
    status = console.status("data") if console and console.is_terminal else None
    if status:
        status.start()
    texts: dict = {}
    try:
        say = status.update if status else _lines(console, start) if console else None
        report = build_data(lab.spec, lab.path, lab.store, say=say, texts=texts)
    finally:
        if status:
            status.stop()
    from tunelab.data.batches import worker_peak_kib, workers_started

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    # the step's own cost, on this machine: not part of the version's stored report
    report["cost"] = {
        "seconds": round(time.perf_counter() - start, 2),
        "peak_memory_gib": round(own / 2**20, 2),
        "worker_peak_memory_gib": round(worker_peak_kib() / 2**20, 2),
        "signature_workers": workers_started(),
        "texts": texts,  # held in memory, or past data.texts_in_memory_mb on disk
    }
    return report


def _lines(console, start: float):
    """Where stderr is a file: each stage of the data step a line, with the seconds so far."""
    import time

    def say(text: str) -> None:
        console.print(f"{text} ({time.perf_counter() - start:.0f} s)", highlight=False)

    return say


@command(
    "inspect",
    "show examples exactly as the trainer sees them",
    "inspect:inspect",
    arg(
        "--sample",
        type=count,
        help="examples per category (default 2, at most 24 examples in all unless given)",
    ),
    arg(
        "--split",
        default="train",
        choices=["train", "validation"],
        help="the split to show (default train; the sealed test split is never shown)",
    ),
    overrides=True,
)
def cmd_inspect(args):
    # as check and run would: examples longer than the model's positions are never trained
    lab = opened(args, needs_base, needs_positions)
    from tunelab.stages.inspect.lab import inspect_lab

    return inspect_lab(lab, args.sample, args.split)


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
    def not_measured_yet(lab) -> None:  # a second identical baseline: refused without torch
        from tunelab.stages.baseline.once import not_measured_yet

        not_measured_yet(lab, args.name)

    lab = opened(args, needs_base, needs_usable, needs_positions, needs_scorable, not_measured_yet)
    from tunelab.stages.baseline.measure import run_baseline

    return run_baseline(lab, progress(args), args.name)


@command(
    "check",
    "preflight on a slice: wiring, updates, reload, backend",
    "check:check",
    arg(
        "--rows",
        type=positive,
        default=16,
        help="train rows in the slice (default 16); it takes a quarter as many validation rows "
        "(at least 1)",
    ),
    overrides=True,
    device=True,
)
def cmd_check(args):
    # a LoRA target matching nothing is an item of the checklist, not a refusal
    lab = opened(args, needs_base, needs_usable, needs_positions, needs_scorable)
    from tunelab.stages.check.steps import run_check

    return run_check(lab, progress(args), args.rows)


@command(
    "size",
    "measure a training step's memory beside the estimate",
    "size:size",
    arg("--seq-len", type=positive, help="tokens per example (default: p95 of train)"),
    arg("--microbatch", type=positive, help="default: the spec's training.microbatch"),
    arg(
        "--memory-limit",
        type=rate,
        metavar="MIB",
        help="memory budget for the largest microbatch on CPU (default: available memory)",
    ),
    arg(
        "--nproc",
        type=positive,
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
    if args.strategy is not None and args.nproc == 1:  # one process shards nothing
        from tunelab.core.errors import TunelabError

        raise TunelabError(
            f"--strategy {args.strategy} says how several processes share the model; with one "
            "process there is nothing to share: add --nproc N (2 or more) to measure it"
        )
    lab = opened(args, needs_sizable, needs_base, needs_targets, needs_usable, needs_positions)
    if args.seq_len:
        from tunelab.modeling.positions import require_length

        require_length(lab, args.seq_len, "--seq-len")
    from tunelab.stages.size.measure import run_size

    return run_size(
        lab,
        args.seq_len,
        args.microbatch,
        args.memory_limit,
        progress(args),
        nproc=args.nproc,
        strategy=args.strategy,
    )
