"""The commands that train and judge: a variant, an ablation, the comparison, a resumed or
invalidated run, and the sealed final."""

from __future__ import annotations

from tunelab.commands.opening import (
    BASE,
    lab_store,
    needs_base,
    needs_one_change,
    needs_plan,
    needs_positions,
    needs_recorded_base,
    needs_scorable,
    needs_targets,
    needs_usable,
    opened,
    opened_records,
    progress,
    reopened,
)
from tunelab.commands.table import arg, command, positive

MODEL_CHECKS = (
    needs_base,
    needs_targets,
    needs_usable,
    needs_positions,
    needs_scorable,
    needs_recorded_base,
)
"""What `run` refuses of a spec before its model loads, besides its plan and parent; the
commands that train or score one make them too, `noise` and `resume` on the run's record (and
there the base must be the one the run trained on)."""

SEEDS = arg(
    "--seeds",
    type=positive,
    metavar="N",
    help="train N seeds of each variant as one replicate group (default: training.replicates)",
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
    SEEDS,
    overrides=True,
    device=True,
    processes=True,
)
def cmd_run(args):
    if args.name is not None:  # a name is refused before anything else is read
        from tunelab.core.run_names import check_run_name

        check_run_name(args.name)
    one_change = needs_one_change(args.parent, args.reason)
    checks = (needs_plan, *MODEL_CHECKS, one_change)
    lab = opened(args, *checks)
    seeds = args.seeds or lab.spec.training.replicates
    run_args = dict(allow_warnings=args.allow_warnings, parent=args.parent, reason=args.reason)
    if seeds > 1:
        from tunelab.stages.run.replicates import run_replicates

        return run_replicates(lab, seeds, args.name, progress(args), **run_args)
    from tunelab.stages.run.replicates import interrupted_with
    from tunelab.stages.run.variant import run_variant

    console, seed = progress(args), lab.spec.training.seed
    if console and (begun := interrupted_with(lab, seed)):
        console.print(
            f"[yellow]warning[/] {begun} began this spec with seed {seed} and was interrupted: "
            f"`tunelab resume {begun}` finishes it; this run trains the "
            "seed anew beside it"
        )
    return run_variant(lab, args.name, console, **run_args)


@command(
    "ablate",
    "one variant per value of one parameter",
    "runs:ablation",
    arg("assignment", metavar="KEY=V1,V2,...", help="e.g. training.lr=1e-4,5e-4 or method.r=4,16"),
    arg("--parent", help="common parent (default: newest baseline)"),
    arg(
        "--check",
        action="store_true",
        help="run `tunelab check` on each value's wiring before its run, unless a passed check "
        "covers it already; stop at a failed one",
    ),
    SEEDS,
    device=True,
    no_overrides=" beside its one KEY=V1,V2,...: set the others in tunelab.yaml",
)
def cmd_ablate(args):
    # every value refused before any model, as `run` is (and before torch is imported)
    from tunelab.stages.run.ablate import run_ablation

    checks = (needs_plan, *MODEL_CHECKS)

    console = progress(args)
    prepare = None
    if args.check:
        from tunelab.core.errors import TunelabError

        key = args.assignment.partition("=")[0].strip()

        def prepare(lab):  # the check's stage loads torch: imported once every value passed
            from tunelab.stages.check.steps import wiring_checked

            checked = wiring_checked(lab, console)
            if not checked["passed"]:
                raise TunelabError(
                    f"--check: the check of {lab.where(key)} FAILED "
                    f"({', '.join(checked['failed'])}), so it did not run, nor the values after "
                    f"it; `tunelab check {key}=VALUE` shows why ({checked['file']})"
                )
            return checked

    return run_ablation(
        args.lab, args.assignment, args.parent, console, args.device, args.seeds, prepare, checks
    )


@command(
    "noise",
    "measure a run's noise floor: its seed-to-seed spread",
    "runs:noise",
    arg("run", nargs="?", help="a completed variant (default: the newest)"),
    arg(
        "--seeds", type=positive, default=3, help="seeds in all, the run's own included (default 3)"
    ),
    device=True,
)
def cmd_noise(args):
    from tunelab.stages.noise import measure_noise

    checks = MODEL_CHECKS  # on the run's recorded spec, as `resume` makes them
    lab = lab_store(args.lab).lab  # a mistyped --lab had read "`tunelab run` first"
    return measure_noise(lab, args.run, args.seeds, progress(args), args.device, checks)


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
    no_overrides=": it judges the runs as they were recorded, under the hypothesis and "
    "guardrails recorded with them, so that a verdict cannot be changed after the fact (to test "
    "other rules, train the variants under a spec that states them)",
)
def cmd_compare(args):
    lab = opened_records(args)
    from tunelab.stages.compare.verdicts import compare

    return compare(lab, args.against, args.reason, args.accept_unresolved)


@command(
    "resume",
    "continue an interrupted run from its checkpoint",
    "runs:run",
    arg("run", help="run id, e.g. r003-lora"),
    device=True,
    processes=True,
)
def cmd_resume(args):
    from tunelab.stages.run.resumable import resumable  # no torch: a run it cannot continue

    reopened(args, resumable, *MODEL_CHECKS)  # then `run`'s checks on the recorded spec
    from tunelab.stages.run.resume import resume_run

    return resume_run(args.lab, args.run, progress(args), args.device)


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
    "final:final",
    arg("run", help="the chosen run id, e.g. r004-lora"),
    arg("--reason", help="required after the first opening of the test split; recorded"),
    BASE,
    device=True,
)
def cmd_final(args):
    from tunelab.stages.final.sealed import run_final

    checks = (needs_base, needs_targets, needs_positions)  # the run's spec, before the seal
    # the run's recorded lab (today's tunelab.yaml is not read), without a device: the
    # refusals from the records come before torch loads
    lab = reopened(args)
    return run_final(lab, args.run, args.reason, checks, args.device, args.base)
