"""What every demo shares: its lab folder and spec, the opening question, sections, the ending.

A demo reads like a short lab report: the question and its guardrails first, then one
numbered section per stage, then how long it took (in all and by section) and where to look
next.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.rule import Rule

from tunelab.core.lab import Lab, open_lab
from tunelab.core.layout import FINALS
from tunelab.core.spec import SPEC_FILE, apply_overrides
from tunelab.demo.assets import set_aside
from tunelab.stages.compare.rules import BROKEN_VERDICT, LOSSES
from tunelab.tasks import units
from tunelab.tasks.pretrain import lower_is_better
from tunelab.views import style


@dataclass
class DemoReport:
    out: Console
    """Where the report goes (silent with --json)."""
    progress: Console | None
    """Where progress bars go (stderr; None with --json)."""
    lab: Lab
    started: float
    materials: dict | None = None
    """What the demo wrote into its lab before it opened (images, a converted base)."""
    begun: list[tuple[str, float]] = field(default_factory=list)
    """Each section's title and when it began (`time.perf_counter`)."""

    def section(self, title: str) -> None:
        self.begun.append((title, time.perf_counter()))
        self.out.print(Rule(f"{len(self.begun)}. {title}"))

    def note(self, text: str) -> None:
        """A line of progress that is not part of the report (stderr, not with --json)."""
        if self.progress:
            self.progress.print(f"[dim]{text}[/]")

    def finish(self, *explore: str) -> dict:
        """The ending: the time in all and by section, and where to look next. Returns the
        times as the demo's result holds them (`seconds`, `sections`)."""
        ended = time.perf_counter()
        sections = section_times(self.started, self.begun, ended)
        self.out.print(Rule())
        by_section = ", ".join(
            f"{s['n'] or s['title']} {_mmss(s['seconds'])}" for s in sections
        )  # section 0, never shown as one, is the set-up before the first
        self.out.print(
            f"done in {(ended - self.started) / 60:.1f} min (m:ss by section: {by_section})."
        )
        lab = shlex.quote(str(self.lab.path))
        hints = ", ".join(f"`tunelab {c} --lab {lab}`" for c in explore)
        self.out.print(f"Explore it: {hints}.")
        return {"seconds": round(ended - self.started, 1), "sections": sections}


def section_times(
    started: float, begun: list[tuple[str, float]], ended: float
) -> list[dict[str, Any]]:
    """Each section's seconds, from its start to the next one's (the last one's to `ended`);
    section 0, the set-up (the lab, its spec and materials), before the first."""
    starts = [("set-up", started), *begun]
    ends = [t for _, t in begun] + [ended]
    return [
        {"n": n, "title": title, "seconds": round(end - start, 1)}
        for n, ((title, start), end) in enumerate(zip(starts, ends, strict=True))
    ]


def _mmss(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}:{rest:02d}"


def write_spec(lab: Path, spec: dict, header: str, paths: dict[str, Path]) -> Path:
    """The demo's spec as YAML, with `'{name}'` placeholders replaced by installed paths."""
    text = yaml.safe_dump(spec, sort_keys=False)
    for name, path in paths.items():
        text = text.replace(f"'{{{name}}}'", str(path))
    lab.mkdir(parents=True, exist_ok=True)
    (lab / SPEC_FILE).write_text(f"# tunelab demo: {header}\n{text}")
    return lab / SPEC_FILE


def open_demo(
    lab: Path,
    title: str,
    spec: dict,
    paths: dict[str, Path],
    console: Console,
    quiet: bool = False,
    overrides: dict | None = None,
    before: Callable[[Path], dict] | None = None,
) -> DemoReport:
    """Set an earlier demo lab aside (never delete it), write the spec with the user's
    `key=value` overrides applied (and what `before` writes into the new lab folder: its
    materials), open the lab and print the question with its guardrails."""
    out = Console(quiet=True) if quiet else console
    progress = None if quiet else style.console(stderr=True)
    started = time.perf_counter()
    moved = set_aside(lab)
    write_spec(lab, spec, title, paths)
    materials = before(lab) if before is not None else None
    if overrides:  # checked as any command's are, named as the command line's (a bad one had
        open_lab(lab, overrides)  # been blamed on a line of the spec the demo wrote)
        write_spec(lab, apply_overrides(spec, overrides), title, paths)
    handle = open_lab(lab)
    s = handle.spec
    out.print(Rule(f"[bold]tunelab demo: {title}"))
    out.print(
        f"lab: {handle.path}" + (f"  (the previous demo lab was moved to {moved})" if moved else "")
    )
    out.print(f"[bold]Question.[/] {s.hypothesis.behaviour}")
    out.print(
        f"Primary metric {s.hypothesis.metric.replace('_', ' ')}, "
        f"{units.effect(s.hypothesis.metric, s.hypothesis.min_effect)}; guardrails: "
        + "; ".join(_rail_text(g) for g in s.guardrails)
        + "."
    )
    return DemoReport(out, progress, handle, started, materials=materials)


def _rail_text(g) -> str:
    """`f1 (every class) may drop at most 3.0 points`, `json valid (overall) may not drop`; a
    lower-is-better metric (a forgetting guardrail's, by its text) `may rise at most 0.05`."""
    name = g.metric.replace("_", " ") + (f" on {g.on}" if g.on else "")
    if not g.on:
        name += f" ({g.scope.replace('_', ' ')})"
    if g.metric in lower_is_better:
        return f"{name} may rise at most {g.max_drop:g}"
    return (
        f"{name} may drop at most {100 * g.max_drop:.1f} points"
        if g.max_drop
        else f"{name} may not drop"
    )


def check_new_wiring(report: DemoReport) -> Callable[[Lab], dict]:
    """For `run_ablation(prepare=...)`: run `tunelab check` on a value's lab when no passed
    check covers its wiring (an ablation of the architecture or the head changes which code
    runs), said in one line; a failed check shows its checklist and stops the demo."""
    from tunelab.core.errors import TunelabError
    from tunelab.stages.check.steps import wiring_checked
    from tunelab.views import check as check_view

    def prepare(lab: Lab) -> dict:
        checked = wiring_checked(lab, report.out)
        if not checked["passed"]:
            check_view.check(checked["result"], report.out)
            raise TunelabError(f"the check of this wiring failed: {checked['file']}")
        return checked

    return prepare


def handover(report: DemoReport, run_id: str, merge: bool = False) -> dict:
    """The demo's last section: export the chosen run, verify the bundle in a fresh process,
    plan a 7-day rental from the handed-over run's own measurements (in brief: the full plan is
    in its record and the lab report), and write the lab report."""
    from tunelab.stages.export.bundle import export_run
    from tunelab.stages.export.verification import record_verification
    from tunelab.stages.export.verify import verify_bundle
    from tunelab.stages.plan.rental import run_plan
    from tunelab.stages.report.html import write_report
    from tunelab.views import export as export_view
    from tunelab.views import plan as plan_view

    out, lab = report.out, report.lab
    report.note(f"exporting {run_id}…")
    bundle = export_run(lab, run_id, merge=merge)
    export_view.export(bundle, out)
    report.note("verifying the bundle in a fresh process…")
    verified = verify_bundle(Path(bundle["bundle"]))
    record_verification(lab.store, bundle, verified)
    export_view.verify(verified, out)
    plan = run_plan(lab, days=7, run_id=run_id)
    plan_view.summary(plan, out)
    page = write_report(lab)
    state = "verified in a fresh process" if verified["passed"] else "NOT verified"
    out.print(
        f"[bold]Handed over[/]: the bundle {bundle['bundle']} ({state}); "
        f"the lab report {page['file']}"
    )
    sealed = None
    if not [f for f in lab.store.records(FINALS) if f.get("run") == run_id]:  # said, not left
        test = sealed = lab.store.data_manifest(lab.data_version)["counts"]["test"]["n"]
        out.print(
            f"The {test:,} test rows stay sealed: its numbers above are validation's, and "
            f"`tunelab final {run_id} --lab {shlex.quote(str(lab.path))}` opens the test split "
            "once for it."
        )
    result = {"export": bundle, "verify": verified, "plan": plan, "report": page}
    return result | {"test_sealed": sealed}  # the test rows no final opened for the run


def seed_note(result: dict) -> str:
    """How the comparison's verdicts treated the noise of training, read from its intervals."""
    judged = [r for r in result["runs"] if r.get("vs_reference")]
    counted = [r["id"] for r in judged if r["vs_reference"]["bootstrap"]["basis"] != "examples"]
    if not judged:
        return "No variant was judged."
    if len(counted) == len(judged):
        sources = sorted(
            {s for r in judged for s in r["vs_reference"]["bootstrap"]["seeds"]["sources"]}
        )
        return (
            "Seed noise: every interval above counts the seeds' spread as well as the "
            f"examples' (from {', '.join(sources)})."
        )
    single = [r["id"] for r in judged if r["id"] not in counted]
    ran = (
        f"{single[0]} ran one seed and the lab has no noise record for it, so its interval "
        "resamples"
        if len(single) == 1
        else f"{', '.join(single)} ran one seed each and the lab has no noise record for them, "
        "so their intervals resample"
    )
    command = f"`tunelab noise {single[0]} --seeds 3`"
    said = any(command in reason for r in judged for reason in r.get("reasons", ()))
    measures = (  # the comparison above may have named the command already
        "that command above measures the floor"
        if said
        else f"{command} measures the floor in 2 more runs"
    )
    return (
        f"Seed noise: {ran} validation examples only: a gain can read at most 'improved on "
        f"one seed', a loss 'worse on one seed'; {measures}, and its record counts in every "
        "comparison where either run is of its family (same data, base model, method type, "
        "budget and evaluation)."
    )


def choose_for_final(result: dict, out: Console) -> tuple[str, str | None]:
    """The one candidate the test split sees: the best variant on validation among those
    that are neither worse than the reference nor past a guardrail. Unless it was judged
    `improved`, the seal is opened with a reason that says why, printed and recorded."""
    metric = result["primary_metric"]
    variants = [r for r in result["runs"] if r["kind"] == "variant"]
    eligible = [r for r in variants if r["verdict"] not in (*LOSSES, BROKEN_VERDICT)]
    best = max(eligible or variants, key=lambda r: r[metric])
    reason = None
    if not eligible:
        reason = (
            "no variant is eligible (each is worse or breaks a guardrail); the demo opens the "
            "seal for the best on validation to show the final step"
        )
    elif best["verdict"] != "improved":
        reason = (
            f"the best eligible variant is '{best['verdict']}', not improved; the demo opens "
            "the seal for it to show the final step"
        )
    out.print(
        f"Chosen on validation alone: {best['id']} ({metric.replace('_', ' ')} "
        f"{style.pct(best[metric])}%, verdict {best['verdict']}). The test split is opened once, "
        "for it; a second look would need a reason and is marked in every later report."
        + (f"\n[yellow]Opened with a recorded reason:[/] {reason}." if reason else "")
    )
    return best["id"], reason


def broken_runs(store, result: dict) -> list[str]:
    """A sentence for each judged variant whose training broke (its probe's start lost, or a
    loss that ended above where it began): its verdict is read from a score that says the run
    broke, not what its change is worth."""
    out, records = [], {r["id"]: r for r in store.runs()}
    for row in result["runs"]:
        if row.get("kind") != "variant" or not row.get("vs_reference"):
            continue
        training = records.get(row["id"], {}).get("training") or {}
        if lost := training.get("start_lost"):
            what = (
                f"its first training loss was {lost['first']:.4f} against its probe's "
                f"{lost['probe']:.4f}, its start lost before the first update"
            )
        elif went := training.get("diverged"):
            what = (
                "its training loss ended higher than it began "
                f"({went['first']:.4f} -> {went['last']:.4f})"
            )
        else:
            continue
        out.append(
            f"Read {row['id']}'s verdict ({row['verdict']}) with care: {what}, so its score says "
            "the run broke, not what its change is worth."
        )
    return out


def cut_note(lab) -> str | None:
    """Where validation inputs run past `model.max_length`: that the model reads only their
    beginnings (the classification demo's articles are all cut to 128 tokens, which its report
    first said at the handover), counted as the bundle counts them (`export.truncation`)."""
    from tunelab.modeling.model import load_tokenizer
    from tunelab.stages.export.truncation import truncation

    spec, version = lab.spec, lab.data_version
    rows = {r["id"]: r for r in lab.store.read_split(version, "validation")}
    manifest = lab.store.data_manifest(version)
    tokenizer = load_tokenizer(spec.model, lab.path, version)
    cut = truncation(spec, lab, manifest, rows, tokenizer)
    if not cut or not cut["truncated"]:
        return None
    return (
        f"The model reads at most {spec.model.max_length} tokens of a text (model.max_length): "
        f"{cut['truncated']:,} of {cut['n']:,} validation texts are longer, so every score "
        "below is of their beginnings."
    )
