"""The command line: one subcommand per stage, each mapped to one library function.

No logic lives here: parse, call the stage, print its result (human or `--json`), exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from tunelab.core.spec import parse_overrides
from tunelab.training.loop import TrainingInterrupted
from tunelab.views import check as show_preflight
from tunelab.views import runs as show

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _lab(args):
    from tunelab.core.lab import open_lab

    return open_lab(args.lab, parse_overrides(args.overrides))


def _progress(args) -> Console | None:
    """Progress bars go to stderr, only on a terminal and never with --json."""
    err = Console(stderr=True)
    return None if args.json or not err.is_terminal else err


def cmd_init(args):
    from tunelab.stages.init import init_lab

    return init_lab(args.lab, args.task, args.force)


def cmd_data(args):
    from tunelab.data import build_data

    lab = _lab(args)
    return build_data(lab.spec, lab.path, lab.store)


def cmd_baseline(args):
    from tunelab.stages.baseline import run_baseline

    return run_baseline(_lab(args), _progress(args))


def cmd_check(args):
    from tunelab.stages.check.steps import run_check

    return run_check(_lab(args), _progress(args), args.rows)


def cmd_size(args):
    from tunelab.stages.size.measure import run_size

    return run_size(_lab(args), args.seq_len, args.microbatch, args.memory_limit, _progress(args))


def cmd_run(args):
    from tunelab.stages.run.variant import run_variant

    return run_variant(
        _lab(args), args.name, _progress(args), args.allow_warnings, args.parent, args.reason
    )


def cmd_inspect(args):
    from tunelab.stages.inspection import inspect_lab

    return inspect_lab(_lab(args), args.sample, args.split)


def cmd_compare(args):
    from tunelab.stages.compare.verdicts import compare

    return compare(_lab(args), args.against)


def cmd_runs(args):
    from tunelab.core.ledger import summary
    from tunelab.core.store import Store

    store = Store(args.lab)
    return [summary(r, store.runs_dir / r["id"]) for r in store.runs()]


def cmd_resume(args):
    from tunelab.stages.run.variant import resume_run

    return resume_run(args.lab, args.run, _progress(args))


def cmd_invalidate(args):
    from tunelab.core.ledger import invalidate
    from tunelab.core.store import Store

    return invalidate(Store(args.lab), args.run, args.why)


def cmd_final(args):
    from tunelab.core.lab import open_lab
    from tunelab.stages.final import run_final

    return run_final(open_lab(args.lab), args.run, args.reason)


def cmd_ablate(args):
    from tunelab.stages.run.ablate import run_ablation

    return run_ablation(args.lab, args.assignment, args.parent, _progress(args))


def cmd_demo(args):
    from tunelab.demo import run_demo

    return run_demo(args.task, args.dir, show.console(), quiet=args.json)


# name -> (handler, human view, help)
COMMANDS: dict[str, tuple[Callable, Callable | None, str]] = {
    "init": (cmd_init, show.init, "write a commented starting spec"),
    "data": (cmd_data, show.data, "load, validate, clean, split, deduplicate and version data"),
    "inspect": (cmd_inspect, show.inspect, "show examples exactly as the trainer sees them"),
    "baseline": (cmd_baseline, show.baseline, "evaluate the starting points on validation"),
    "check": (
        cmd_check,
        show_preflight.check,
        "preflight on a slice: wiring, updates, reload, backend",
    ),
    "size": (cmd_size, show_preflight.size, "measure a training step's memory beside the estimate"),
    "run": (cmd_run, show.run, "train one variant and evaluate it"),
    "ablate": (cmd_ablate, show.ablation, "one variant per value of one parameter"),
    "compare": (cmd_compare, show.compare, "every run beside the baseline, with verdicts"),
    "resume": (cmd_resume, show.run, "continue an interrupted run from its checkpoint"),
    "invalidate": (cmd_invalidate, show.invalidated, "mark a run invalid, with the reason"),
    "final": (cmd_final, show.final, "open the sealed test split once for a chosen run"),
    "runs": (cmd_runs, show.runs, "list the runs of the lab"),
    "demo": (cmd_demo, None, "run the embedded default lab end to end"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tunelab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (handler, _, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(handler=handler, command=name)
        p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
        if name != "demo":
            p.add_argument("--lab", type=Path, default=Path("."), help="lab folder (default .)")
        if name in {"data", "inspect", "baseline", "check", "size", "run", "compare"}:
            p.add_argument(
                "overrides",
                nargs="*",
                metavar="key=value",
                help="override spec fields for this command, e.g. training.lr=1e-4",
            )
    sub.choices["resume"].add_argument("run", help="run id, e.g. r003-lora")
    sub.choices["invalidate"].add_argument("run", help="run id")
    sub.choices["invalidate"].add_argument("--why", required=True, help="what makes it invalid")
    sub.choices["ablate"].add_argument(
        "assignment", metavar="KEY=V1,V2,...", help="e.g. training.lr=1e-4,5e-4 or method.r=4,16"
    )
    sub.choices["ablate"].add_argument("--parent", help="common parent (default: newest baseline)")
    sub.choices["final"].add_argument("run", help="the chosen run id, e.g. r004-lora")
    sub.choices["final"].add_argument(
        "--reason", help="required after the first opening of the test split; recorded"
    )
    sub.choices["init"].add_argument("--task", default="classification")
    sub.choices["init"].add_argument("--force", action="store_true")
    sub.choices["check"].add_argument(
        "--rows", type=int, default=16, help="train and validation rows in the slice (default 16)"
    )
    size = sub.choices["size"]
    size.add_argument("--seq-len", type=int, help="tokens per example (default: p95 of train)")
    size.add_argument("--microbatch", type=int, help="default: the spec's training.microbatch")
    size.add_argument(
        "--memory-limit",
        type=float,
        metavar="MIB",
        help="memory budget for the largest microbatch on CPU (default: available memory)",
    )
    sub.choices["run"].add_argument("--name", help="run name (default: the method)")
    sub.choices["run"].add_argument(
        "--parent", help="run this variant descends from (default: the newest baseline)"
    )
    sub.choices["run"].add_argument(
        "--reason",
        help="why more than one parameter group changes against the parent; recorded",
    )
    sub.choices["run"].add_argument(
        "--allow-warnings",
        metavar="REASON",
        help="train despite blocking inspect findings; the reason is recorded",
    )
    sub.choices["inspect"].add_argument(
        "--sample", type=int, default=2, help="examples per category (default 2)"
    )
    sub.choices["inspect"].add_argument("--split", default="train", choices=["train", "validation"])
    sub.choices["compare"].add_argument(
        "--against", help="reference run id (default: best baseline)"
    )
    sub.choices["demo"].add_argument("task", nargs="?", default="classification")
    sub.choices["demo"].add_argument(
        "--dir", type=Path, default=None, help="lab folder (default demo-lab/TASK)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _quiet_libraries()
    try:
        result = args.handler(args)
    except (KeyboardInterrupt, TrainingInterrupted) as err:
        _error(
            args,
            f"interrupted ({err or 'Ctrl-C'}); the run is recorded as interrupted: "
            "`tunelab resume RUN` continues it.",
        )
        return EXIT_INTERRUPTED
    except Exception as err:  # every failure reaches the user as one clear message
        _error(args, str(err))
        return EXIT_USAGE if isinstance(err, ValueError | FileExistsError) else EXIT_FAIL
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False, default=str))
    else:
        view = COMMANDS[args.command][1]
        if view:
            view(result, show.console())
    # a result that says it did not pass (a failed `check`) exits 1, after it is shown
    return EXIT_FAIL if isinstance(result, dict) and result.get("passed") is False else EXIT_OK


def _error(args, message: str) -> None:
    if args.json:
        print(json.dumps({"error": message, "command": args.command}))
    else:
        Console(stderr=True).print(
            f"[bold red]error[/] ({args.command}): {escape(message)}", highlight=False
        )


def _quiet_libraries() -> None:
    """transformers warns about long inputs that tunelab truncates on purpose; keep it quiet."""
    import warnings

    from transformers.utils import logging

    warnings.filterwarnings("ignore", category=FutureWarning)
    logging.set_verbosity_error()
    logging.disable_progress_bar()


if __name__ == "__main__":
    sys.exit(main())
