"""The commands that hand a lab over (a rental plan, a bundle and its verification, the report,
its runs in MLflow), the run list and the demos."""

from __future__ import annotations

from pathlib import Path

from tunelab.commands.opening import (
    BASE,
    lab_store,
    needs_base,
    needs_positions,
    needs_recorded_base,
    needs_targets,
    opened_records,
    reopened,
)
from tunelab.commands.table import amount, arg, command, rate


@command(
    "plan",
    "lay a 3, 7 or 30 day rental out in phases from what the lab measured",
    "plan:plan",
    arg("--days", type=int, choices=[3, 7, 30], help="rental length (default: rental.days)"),
    arg(
        "--price-per-hour",
        type=amount,
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
        type=rate,
        metavar="T",
        help="training throughput measured on that device; recorded with the plan",
    ),
    arg(
        "--run",
        metavar="RUN",
        help="the completed variant whose speed the plan uses, e.g. the one you hand over "
        "(default: the newest one measured on the device)",
    ),
    overrides=True,
)
def cmd_plan(args):
    lab = opened_records(args)
    from tunelab.stages.plan.rental import run_plan

    return run_plan(
        lab, args.days, args.price_per_hour, args.device, args.tokens_per_second, args.run
    )


@command(
    "export",
    "write the handover bundle of a run, bound to its exact base model",
    "export:export",
    arg("run", help="the run to hand over, e.g. r004-lora"),
    arg("--out", type=Path, help="bundle folder (default: bundles/RUN in the lab)"),
    arg("--merge", action="store_true", help="also fold the LoRA into merged weights (checked)"),
    arg(
        "--gguf",
        nargs="?",
        const="f16",
        choices=["f32", "f16", "q8_0"],
        metavar="TYPE",
        help="also write the merged model as one GGUF file for llama.cpp (f32, f16 (default), "
        "q8_0), with the run's tokenizer and chat template; Llama and Qwen2 models",
    ),
    BASE,
    device=True,
)
def cmd_export(args):
    # the base as the run trained on it: there, with its targets and enough positions (a base
    # changed since had exported, and `verify` then failed inside the model)
    from tunelab.stages.export.exportable import exportable  # no torch: what the run is, first

    # the run's recorded spec, not today's tunelab.yaml (a typo there blocked a handover)
    lab = reopened(
        args, exportable, needs_base, needs_targets, needs_positions, needs_recorded_base
    )
    from tunelab.core.env import pick_device
    from tunelab.stages.export.bundle import export_run

    lab.device = pick_device(args.device)
    return export_run(lab, args.run, args.out, args.merge, args.gguf, args.base)


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
    from tunelab.core.env import pick_device
    from tunelab.stages.export.verification import verify_and_record

    # as the help says: --device, else TUNELAB_DEVICE, else CUDA when present; one absent here
    # is refused by name (exit 2), not found broken in the bundle's load
    return verify_and_record(args.bundle, args.base, str(pick_device(args.device)))


@command(
    "report",
    "write one static HTML page of the whole lab: runs, curves, comparisons, memory, plan",
    "report:report",
    arg(
        "--out",
        help="where to write the page (default: lab-report.html in the lab; a folder, or a path "
        "ending in /, gets it inside)",
    ),
)
def cmd_report(args):
    lab = opened_records(args)
    from tunelab.stages.report.html import write_report

    return write_report(lab, args.out)


@command(
    "track",
    "write the lab into MLflow: a run per tunelab run (spec, loss by step, metrics, state, "
    "verdict, record), the report and comparisons; a second track adds nothing",
    "track:track",
    arg(
        "--mlflow",
        nargs="?",
        metavar="URI",
        help="any tracking URI MLflow accepts (http://host:5000, sqlite:///x.db, databricks), "
        "a .db file (SQLite) or a folder (MLflow's file store); default: MLFLOW_TRACKING_URI, "
        "else sqlite:///LAB/mlflow.db with artifacts in LAB/mlartifacts. Needs "
        "pip install 'tunelab[mlflow]' (mlflow-skinny, and SQLAlchemy for SQLite)",
    ),
    arg("--experiment", metavar="NAME", help="MLflow experiment (default: the lab folder's name)"),
)
def cmd_track(args):
    from tunelab.stages.track.track import track_lab

    return track_lab(args.lab, args.mlflow, args.experiment)


@command("runs", "list the runs of the lab", "runs:runs")
def cmd_runs(args):
    from tunelab.core.ledger import listing

    return listing(lab_store(args.lab))


@command(
    "demo",
    "run the embedded default lab end to end",
    None,
    arg(
        "task",
        nargs="?",
        default="classification",
        help="classification (default), extraction, ablation or images",
    ),
    arg("--dir", type=Path, default=None, help="lab folder (default demo-lab/TASK)"),
    lab=False,
    overrides=True,
)
def cmd_demo(args):
    from tunelab.core.spec import parse_overrides
    from tunelab.demo import run_demo
    from tunelab.views.style import console

    overrides = parse_overrides(args.overrides or [])  # applied to the demo's spec
    return run_demo(args.task, args.dir, console(), quiet=args.json, overrides=overrides)


@command(
    "fsck",
    "check a whole lab's integrity: the log's chain, data, comparisons, runs, bundles",
    "fsck:fsck",
    arg("--repair", action="store_true", help="mark the log's breaks as forgiven (needs --reason)"),
    arg("--reason", help="why the log's breaks are forgiven; recorded in the log"),
)
def cmd_fsck(args):
    from tunelab.stages.fsck import fsck

    if args.reason is not None and not args.repair:  # it had been dropped in silence
        from tunelab.core.errors import TunelabError

        raise TunelabError("--reason goes with --repair: `tunelab fsck --repair --reason R`")
    return fsck(args.lab, args.repair, args.reason)
