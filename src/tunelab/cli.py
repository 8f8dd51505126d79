"""The command line: one subcommand per stage, each mapped to one library function.

No logic lives here: the commands and their arguments are a table (`commands/`); `main`
parses, calls the command's stage, prints the result (its human view or `--json`) and sets the
exit code. Stages and views are imported only when their command runs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
from pathlib import Path

from tunelab.commands import COMMANDS
from tunelab.commands.opening import name_runs
from tunelab.core.env import ProgressToAClosedPipe, mark_command_start, reproducible_blas
from tunelab.core.errors import (
    Interrupted,
    TrainingInterrupted,
    TunelabError,
    disk_full,
    no_permission,
    not_a_folder,
    out_of_memory,
    stop_cause,
)
from tunelab.core.stopping import interrupt_on_signals

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_BROKEN_PIPE = 141
"""The reader of stdout closed it early (`tunelab runs --json | head`): 128 + SIGPIPE, as a
tool that SIGPIPE ends exits, with no traceback."""
DEBUG_VARIABLE = "TUNELAB_DEBUG"


# --- parsing, running, exit codes ----------------------------------------------------------------


class UsageError(SystemExit):
    """A command line argparse refuses (an unknown option, a bad choice): exit 2, as argparse
    does, but said by `main`, so that `--json` gets it as JSON on stdout like any other error."""

    def __init__(self, parser: argparse.ArgumentParser, message: str):
        super().__init__(EXIT_USAGE)
        self.parser, self.message = parser, message


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(self, message)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tunelab")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tunelab", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"tunelab {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    parser.set_defaults(commands=sub.choices)  # each command's own parser, for its usage line
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
    try:
        return _main(argv)
    finally:
        if os.environ.get("WORLD_SIZE", "1") != "1":
            from tunelab.training.process_group import collect_before_exit

            collect_before_exit()


def one_stage(given: list[str]) -> bool:
    """Whether the command runs one stage in its process, so that its start is a run's start:
    not a demo, whose one process runs every stage (its runs count from their opening; each
    variant had been charged the data step, the check and the baselines before it)."""
    return next((a for a in given if a in COMMANDS), None) != "demo"


def _main(argv: list[str] | None) -> int:
    whole = argv is None  # this process is the command: the console script, `python -m`
    given = sys.argv[1:] if argv is None else list(argv)
    if whole and one_stage(given):  # a run's record then counts its start-up too (`plan`)
        mark_command_start()
    if whole:
        sys.stderr = ProgressToAClosedPipe(sys.stderr)  # `2>&1 | head` stops no command
    argv = _every_commands_options_after_it(given)
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        cmd = COMMANDS[args.command]
        settings = all("=" in e and not e.startswith("-") for e in extra)  # key=value ones
        if extra and cmd.overrides and settings:
            args.overrides = [*(args.overrides or []), *extra]  # key=value after an option
        elif extra:
            why = f"; `tunelab {args.command}` takes no key=value{cmd.no_overrides}" * settings
            if any(e.split("=")[0] == "--nproc" for e in extra) and cmd.processes:
                why = (
                    f"; `tunelab {args.command}` takes several processes from torchrun: "
                    f"`torchrun --nproc_per_node N -m tunelab.cli {args.command} ...`"
                )
            unknown = f"unrecognized arguments: {' '.join(extra)}"
            args.commands[args.command].error(unknown + why)
    except UsageError as err:
        return _usage_error(err, argv)
    _quiet_libraries()
    _no_hub_kernels()
    _library_caches(args)
    reproducible_blas()
    try:
        with interrupt_on_signals():  # Ctrl-C and SIGTERM stop any command, the same way
            _one_process_unless(args.command, cmd.processes)
            name_runs(args)
            result = cmd.run(args)
    except Interrupted as err:  # the stage says what it recorded and how to go on
        _error(args, f"interrupted ({err.cause}): {err.outcome}")
        return EXIT_INTERRUPTED
    except (KeyboardInterrupt, TrainingInterrupted) as err:
        if _follower():  # rank 0 says what happened to the run
            return EXIT_INTERRUPTED
        _error(
            args,
            f"interrupted ({stop_cause(err)}): `tunelab {args.command}` was stopped before it "
            "returned. Whatever it had finished is recorded whole (`tunelab runs` shows each "
            "run and its status; `tunelab fsck` checks the lab): look there before running it "
            "again.",
        )
        return EXIT_INTERRUPTED
    except TunelabError as err:  # input the user can fix: one line, exit 2
        _error(args, str(err))
        return EXIT_USAGE
    except Exception as err:  # a bug or a broken environment: say so, traceback on request
        debug = args.debug or os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")
        if debug:  # a full disk's traceback too: where it was writing, asked for
            import traceback

            traceback.print_exc()
        # no space, no memory: the user's to fix (and nothing was corrupted)
        if (
            resource := disk_full(err)
            or out_of_memory(err)
            or no_permission(err)
            or not_a_folder(err)
        ):
            _error(args, str(resource))
            return EXIT_USAGE
        hint = "" if debug else f" (rerun with --debug or {DEBUG_VARIABLE}=1 for the traceback)"
        notes = "".join(f"; {n}" for n in getattr(err, "__notes__", []))  # what remains of it
        from tunelab.training.distributed import peer_lost

        said = peer_lost(err) or f"internal error: {type(err).__name__}: {err}{hint}"
        _error(args, said + notes, internal=True)
        return EXIT_FAIL
    if _follower():  # under torchrun, rank 0 alone reports
        return EXIT_OK
    if whole:
        _hold_signals()
    try:
        _show(args, cmd, result)
    except BrokenPipeError:  # the reader stopped reading (`| head`): the work is recorded
        if not whole:
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_BROKEN_PIPE
    # a result that says it did not pass (a failed `check`) exits 1, after it is shown
    return EXIT_FAIL if isinstance(result, dict) and result.get("passed") is False else EXIT_OK


def _show(args: argparse.Namespace, cmd, result) -> None:
    """The result on stdout: its JSON with `--json`, else the command's view."""
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False, default=str))
    elif cmd.view:
        from tunelab.views.style import console

        module, function = cmd.view.split(":")
        getattr(importlib.import_module(f"tunelab.views.{module}"), function)(result, console())
    sys.stdout.flush()  # a closed pipe is found here, not at the interpreter's exit


def _hold_signals() -> None:
    """The command's work is done and recorded: Ctrl-C and SIGTERM are ignored from here until
    the process ends, so its output is printed whole and it exits with its own code. A signal in
    that last second (printing, torch's exit hooks) had ended it with 143 and no output, or with
    exit 0 and a traceback. Ignored process-wide: blocked in this thread alone, a signal the
    kernel gave another thread (torch's, the tokenizers') still ended the process (3 of 5 SIGTERMs
    near a baseline's end). Only where this process is the command: a caller of `main` (a test,
    a script) keeps its signals."""
    for held in (signal.SIGINT, signal.SIGTERM):
        signal.signal(held, signal.SIG_IGN)


EVERY_COMMANDS = ("--json", "--debug")
"""Options every command takes: also read when given before the command's name."""


def _every_commands_options_after_it(argv: list[str]) -> list[str]:
    """`tunelab --json runs` as `tunelab runs --json` (argparse knows them after it only)."""
    at = next((i for i, a in enumerate(argv) if a in COMMANDS), None)
    if at is None:
        return argv
    moved = [a for a in argv[:at] if a in EVERY_COMMANDS]
    return [a for a in argv[:at] if a not in EVERY_COMMANDS] + argv[at:] + moved


def _usage_error(err: UsageError, argv: list[str]) -> int:
    """argparse's refusal: its usage line and message on stderr, or with `--json` the error
    object every command prints on stdout."""
    if "--json" in argv:
        command = next((a for a in argv if a in COMMANDS), None)
        _say(json.dumps({"error": err.message, "command": command, "internal": False}))
    else:
        err.parser.print_usage(sys.stderr)
        print(f"{err.parser.prog}: error: {err.message}", file=sys.stderr)
    return EXIT_USAGE


def _one_process_unless(name: str, processes: bool) -> None:
    """Under `torchrun`, only the commands that train take several processes; any other would
    run N times over the same lab."""
    size = os.environ.get("WORLD_SIZE", "1")
    if size != "1" and not processes:
        from tunelab.training.distributed import DistributedError

        raise DistributedError(
            f"`tunelab {name}` runs in one process, not in torchrun's {size}: start it without "
            "torchrun (only `run` and `resume` train on several processes)"
        )


def _follower() -> bool:
    """A process of rank > 0 under torchrun: it shares rank 0's run and reports nothing."""
    from tunelab.training.distributed import main_process

    return not main_process()


def _say(line: str) -> None:
    """An error's JSON line on stdout; a reader that stopped reading (`| head -c 100`) gets
    the rest of it nowhere, and the command keeps its own exit code (a traceback had ended it)."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit


def _error(args: argparse.Namespace, message: str, internal: bool = False) -> None:
    if _follower():  # under torchrun rank 0 reports on stdout; another rank's own words go to
        # stderr, so `--json` reads one object (a refusal printed once per rank was not JSON)
        rank = os.environ.get("RANK")
        print(f"error ({args.command}, rank {rank}): {message}", file=sys.stderr)
        return
    if args.json:
        _say(json.dumps({"error": message, "command": args.command, "internal": internal}))
        return
    # plain text, one line, not wrapped: a log or a pipe keeps it whole; on a terminal the word
    # "error" is bold red unless NO_COLOR is set (no rich here: 0.1 s of import for one line)
    colour = sys.stderr.isatty() and not os.environ.get("NO_COLOR")
    label = "\033[1;31merror\033[0m" if colour else "error"
    print(f"{label} ({args.command}): {message}", file=sys.stderr)


# Deprecation notices raised inside transformers and PEFT by calls tunelab does not make
# itself; each is filtered by its own text, every other warning still shows.
KNOWN_WARNINGS = (
    r"`is_gradient_checkpointing` is deprecated",
    r"`past_key_values` is deprecated",
)


def _quiet_libraries() -> None:
    """transformers warns about long inputs that tunelab truncates on purpose; keep it quiet,
    and filter the known third-party deprecation notices (KNOWN_WARNINGS) by their text. Library
    progress bars stay off (`TQDM_DISABLE`, read when tqdm is first imported): transformers'
    GGUF reader draws one with tqdm itself, which landed in the middle of a demo's report and
    of every log; tunelab says what a long step is doing in its own words."""
    import warnings

    for message in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=FutureWarning)
    os.environ.setdefault("TQDM_DISABLE", "1")
    if "transformers" not in sys.modules:  # read when a stage first imports it
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        return
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


def _no_hub_kernels() -> None:
    """The model runs its own torch code, never kernels fetched from the Hub. transformers (5.x,
    with its dependency `kernels` installed) swaps layers for Hub kernels when a model is loaded
    for CUDA (the rotary embedding's `kernels-community/rotary`): offline that load fails ("not
    available in the local cache and Hugging Face Hub is in offline mode", seen on an H200), and
    online it would run code no lab records. `USE_HUB_KERNELS=YES` set by the user is kept."""
    os.environ.setdefault("USE_HUB_KERNELS", "NO")


LIBRARY_CACHES = {"MPLCONFIGDIR": "matplotlib", "TORCHINDUCTOR_CACHE_DIR": "torchinductor"}
"""The libraries' own caches a command may write (matplotlib's font list, the report's; the empty
folder torch's compiler makes on import), and their folder in the lab's store cache."""


def _library_caches(args) -> None:
    """Nothing outside the lab is written: the libraries' caches go into the lab's store
    (`.tunelab/cache/`) where a command works in a lab (`--lab` with a store, the demo's lab),
    unless the user set them; they went to `~/.cache/matplotlib` and `$TMPDIR/torchinductor_*`."""
    from tunelab.core.layout import CACHE, STORE_DIR

    if args.command == "demo":
        lab = args.dir or Path("demo-lab") / args.task  # as `demo.run_demo` places it
    else:
        lab = getattr(args, "lab", None)
        if lab is None or not (lab / STORE_DIR).is_dir():
            return
    for variable, folder in LIBRARY_CACHES.items():
        if os.environ.get(variable) in (None, _SET.get(variable)):  # the user's own stands
            _SET[variable] = os.environ[variable] = str(lab.resolve() / STORE_DIR / CACHE / folder)


_SET: dict[str, str] = {}
"""What `_library_caches` set, so a later command in the same process (the tests) sets its own."""


if __name__ == "__main__":
    sys.exit(main())
