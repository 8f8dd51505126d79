"""The report's figures: matplotlib drawn off-screen (no pyplot, no global state), each returned
as an inline `<svg>` string.

The output is deterministic: a fixed hash salt for the ids, no date or creator in the
metadata, text kept as SVG text (escaped by matplotlib's writer) and never parsed as math, so a
class called `$x$` or `<b>` shows as written. Every id is prefixed with the figure's name, so
several figures share one page without clashing.
"""

from __future__ import annotations

import html
import io
import math
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

PALETTE = (
    "#2563eb",
    "#ea580c",
    "#059669",
    "#9333ea",
    "#dc2626",
    "#0891b2",
    "#ca8a04",
    "#db2777",
    "#4b5563",
    "#65a30d",
)
"""Run colours, assigned in run order so one run has one colour in every figure."""

TONES = {
    "improved": "good",
    "improved on one seed": "info",
    "within seed noise": "warn",
    "holds": "good",
    "completed": "good",
    "no evidence": "warn",
    "guardrail unresolved": "warn",
    "unresolved": "warn",
    "interrupted": "warn",
    "running": "info",
    "worse": "bad",
    "worse on one seed": "bad",
    "guardrail broken": "bad",
    "broken": "bad",
    "failed": "bad",
    "lost": "bad",
    "invalid": "muted",
}
"""The tone of a verdict, guardrail status or run state, shared by the figures and the page."""
TONE_COLOURS = {
    "good": "#15803d",
    "warn": "#d97706",
    "bad": "#b91c1c",
    "info": "#2563eb",
    "muted": "#6b7280",
}
INK, GRID, REFERENCE = "#374151", "#e5e7eb", "#9ca3af"

RC = {
    "svg.hashsalt": "tunelab-report",
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica"],
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.titlelocation": "left",
    "axes.edgecolor": REFERENCE,
    "axes.labelcolor": INK,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": GRID,
    "grid.linewidth": 0.8,
    "xtick.color": INK,
    "ytick.color": INK,
    "legend.frameon": False,
    "figure.facecolor": "white",
}
METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
WIDTH = 10.0
"""Figure width in inches; the page scales every figure to its column."""


def tone(word: str | None) -> str:
    """`good`, `warn`, `bad`, `info` or `muted` for a verdict, guardrail status or run state."""
    return TONES.get(word or "", "muted")


def run_colours(run_ids: list[str]) -> dict[str, str]:
    """A colour per run, in run order."""
    return {run_id: PALETTE[i % len(PALETTE)] for i, run_id in enumerate(run_ids)}


def forest(
    rows: list[dict],
    xlabel: str,
    marks: list[tuple[float, str]],
    name: str,
    band: tuple[float, float, str] | None = None,
) -> str:
    """Intervals as a forest plot: one row per `{label, delta, low, high, word}` (in points),
    coloured by the row's verdict or status `word`, its numbers on the right, with dashed
    vertical `marks` (x, label) beside the solid line at zero. Rows of one `group` share a
    band. When a few rows lie far out, the axis keeps to the others and those rows run off
    its edge with an arrow (their numbers still say where they are). A row's `points` (its
    seeds) are drawn as hollow dots and its `example` interval (low, high) as a thin bar below;
    `band` (low, high, label) shades the noise floor around zero."""
    n = len(rows)
    with style():
        fig = Figure(figsize=(WIDTH, 1.3 + 0.34 * n), layout="constrained")
        ax = fig.subplots()
        ys = list(range(n))[::-1]
        _bands(ax, ys, [r.get("group") for r in rows])
        lo, hi = _focus(rows, [x for x, _ in marks] + (list(band[:2]) if band else []))
        if band:  # named in the legend: a label in the plot sat on the bottom row's bar
            ax.axvspan(band[0], band[1], color=TONE_COLOURS["warn"], alpha=0.12, linewidth=0)
        for y, row in zip(ys, rows, strict=True):
            _interval(ax, y, row, lo, hi)
            _seeds(ax, y, row, lo, hi)
        ax.axvline(0, color=INK, linewidth=1)
        top = blended_transform_factory(ax.transData, ax.transAxes)
        for x, label in marks:
            ax.axvline(x, color=REFERENCE, linestyle="--", linewidth=1.2)
            ax.text(x, 1.01, label, transform=top, ha="center", va="bottom", color=INK)
        ax.set_yticks(ys, [r["label"] for r in rows])
        numbers = ax.secondary_yaxis("right")
        numbers.set_yticks(ys, [_ci_text(r) for r in rows])
        numbers.tick_params(length=0)
        numbers.spines["right"].set_visible(False)
        ax.set(xlim=(lo, hi), ylim=(-0.6, n - 0.4), xlabel=xlabel)
        ax.grid(axis="y", visible=False)
        words = list(dict.fromkeys(r["word"] or "no verdict" for r in rows))
        legend = [_dot(TONE_COLOURS[tone(w)], w) for w in words]
        if band:
            legend.append(Patch(color=TONE_COLOURS["warn"], alpha=0.12, label=band[2]))
        fig.legend(handles=legend, loc="outside lower center", ncols=len(legend))
        return svg(fig, name)


FOCUS_POINTS = 10.0
"""A forest plot keeps to rows within this many points of zero (or four times its marks)
when at least half of them are there."""


def _focus(rows: list[dict], marks: list[float]) -> tuple[float, float]:
    reach = max([FOCUS_POINTS, *(4 * abs(x) for x in marks)])
    near = [r for r in rows if -reach <= r["low"] and r["high"] <= reach]
    shown = near if 2 * len(near) >= len(rows) else rows
    xs = [0.0, *marks, *(r["low"] for r in shown), *(r["high"] for r in shown)]
    pad = 0.06 * ((max(xs) - min(xs)) or 1.0)
    return min(xs) - pad, max(xs) + pad


def _interval(ax, y: float, row: dict, lo: float, hi: float) -> None:
    """One row's interval, clipped to [lo, hi] with an arrow where it runs off the axis."""
    colour = TONE_COLOURS[tone(row["word"])]
    left, right = max(row["low"], lo), min(row["high"], hi)
    if left <= right:
        ax.plot([left, right], [y, y], color=colour, linewidth=2.4, solid_capstyle="butt")
    for end, edge, marker in ((row["low"], left, "|"), (row["high"], right, "|")):
        if lo <= end <= hi:
            ax.plot([edge], [y], marker=marker, color=colour, markersize=7)
    if row["low"] < lo:
        ax.plot([lo], [y], marker="<", color=colour, markersize=7, clip_on=False)
    if row["high"] > hi:
        ax.plot([hi], [y], marker=">", color=colour, markersize=7, clip_on=False)
    if lo <= row["delta"] <= hi:
        ax.plot([row["delta"]], [y], marker="o", color=colour, markersize=6)


def _seeds(ax, y: float, row: dict, lo: float, hi: float) -> None:
    """A row's seeds as hollow dots, and its interval over the examples alone as a thin bar."""
    colour = TONE_COLOURS[tone(row["word"])]
    if row.get("example"):
        left, right = max(row["example"][0], lo), min(row["example"][1], hi)
        if left <= right:
            ax.plot([left, right], [y - 0.22, y - 0.22], color=colour, linewidth=1, alpha=0.7)
    points = [x for x in row.get("points", []) if lo <= x <= hi]
    if points:
        ax.plot(points, [y + 0.2] * len(points), "o", mfc="none", mec=colour, markersize=5)


def _bands(ax, ys: list[int], groups: list[str | None]) -> None:
    """A light band behind every other group of rows."""
    shade, previous = True, object()
    for y, group in zip(ys, groups, strict=True):
        if group is None:
            continue
        if group != previous:
            shade, previous = not shade, group
        if shade:
            ax.axhspan(y - 0.5, y + 0.5, color="#f3f4f6", linewidth=0, zorder=0)


def _ci_text(row: dict) -> str:
    """`+1.2 (−0.4, +2.9)`: points with one decimal, or a row's own `digits` (four for bits
    per byte, whose differences are hundredths)."""
    digits = row.get("digits", 1)
    low, high = _signed(row["low"], digits), _signed(row["high"], digits)
    return _signed(row["delta"], digits) + f" ({low}, {high})"


def _signed(x: float, digits: int = 1) -> str:
    return f"{x:+.{digits}f}".replace("-", "\u2212")


MANY_GROUPS = 12
"""More classes (fields, sources) than this: the per-group bars lie down (`group_bars`)."""


def group_bars(
    series: list[tuple[str, dict[str, float]]],
    groups: list[str],
    metric: str,
    colours: dict,
    percent: bool = True,
) -> str:
    """One metric per class, field or source, as grouped bars: a bar per run in each group; a
    share in percent (0 to 100), else the metric as it is (bits per byte). Past `MANY_GROUPS`
    the bars lie down, a row per group, so that each name stays readable (77 intents)."""
    n = max(len(series), 1)
    width = 0.8 / n
    lying = len(groups) > MANY_GROUPS
    height = max(4.0, 0.16 * len(groups) * (1 + 0.3 * (n - 1)) + 1.2) if lying else 4.0
    label = f"{metric} (%)" if percent else metric.replace("_", " ")
    with style():
        fig = Figure(figsize=(WIDTH, height), layout="constrained")
        ax = fig.subplots()
        for i, (run_id, values) in enumerate(series):
            at = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
            sizes = [(100 if percent else 1) * num(values.get(g)) for g in groups]
            bars = ax.barh if lying else ax.bar
            bars(at, sizes, width * 0.9, color=colours.get(run_id), label=run_id)
        if lying:
            ax.set_yticks(range(len(groups)), groups, fontsize=8)
            ax.invert_yaxis()  # the first group on top, as in the table below
            if percent:
                ax.set_xlim(0, 100)
            ax.set_xlabel(label)
            ax.tick_params(axis="x", top=True, labeltop=True)  # a long chart: the scale on top too
            ax.grid(axis="y", visible=False)
        else:
            tilted = len(groups) > 6
            ax.set_xticks(
                range(len(groups)),
                groups,
                rotation=30 if tilted else 0,
                ha="right" if tilted else "center",
            )
            if percent:
                ax.set_ylim(0, 100)
            ax.set_ylabel(label)
            ax.grid(axis="x", visible=False)
        handles, labels = ax.get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 6))
        return svg(fig, f"bars-{_slug(metric)}")


def memory(components: dict[str, float], variants: list[dict], name: str) -> str:
    """Left: the estimate split into components. Right: per configuration (plain,
    accumulation, checkpointing), the estimated peak beside the measured one. MB."""
    rows = max(len(components), 2 * len(variants), 3)
    with style():
        fig = Figure(figsize=(WIDTH, 1.2 + 0.3 * rows), layout="constrained")
        left, right = fig.subplots(1, 2)
        names = list(components)[::-1]
        left.barh(
            [c.replace("_", " ") for c in names],
            [num(components[c]) for c in names],
            color=PALETTE[0],
        )
        left.set(title="estimate by component", xlabel="MB")
        ys = list(range(len(variants)))[::-1]
        estimated = [num(v.get("estimated_peak_mb")) for v in variants]
        measured = [num(v.get("measured_peak_mb")) for v in variants]
        right.barh(
            [y + 0.2 for y in ys], estimated, height=0.38, color=PALETTE[0], label="estimate"
        )
        right.barh([y - 0.2 for y in ys], measured, height=0.38, color=PALETTE[1], label="measured")
        right.set_yticks(ys, [v["name"] for v in variants])
        right.set(title="peak: estimate beside measured", xlabel="MB")
        handles, labels = right.get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=2)
        for ax in (left, right):
            ax.grid(axis="y", visible=False)
        return svg(fig, name)


def timeline(phases: list[dict], days: float | None) -> str:
    """The plan's phases on the rental's hours (at their `start_hour`, else end to end), a
    day (or, past a week, a week) marked by a dotted line."""
    starts, at = [], 0.0
    for p in phases:
        start = num(p.get("start_hour"), at)
        starts.append(start)
        at = start + num(p.get("hours"), 0.0)
    span = max(at, 24 * (days or 0)) or 1.0
    step = 1 if (days or 0) <= 7 else 7
    with style():
        fig = Figure(figsize=(WIDTH, 1.3 + 0.42 * len(phases)), layout="constrained")
        ax = fig.subplots()
        ys = list(range(len(phases)))[::-1]
        for i, (y, p, start) in enumerate(zip(ys, phases, starts, strict=True)):
            hours = num(p.get("hours"), 0.0)
            ax.barh(y, hours, left=start, height=0.6, color=PALETTE[i % len(PALETTE)])
            ax.text(start + hours + span * 0.006, y, f"{hours:g} h", va="center", color=INK)
        for day in range(step, int(days or 0), step):
            ax.axvline(24 * day, color=REFERENCE, linestyle=":", linewidth=1)
        ax.set_yticks(ys, [str(p.get("name", "")) for p in phases])
        ax.set_xlim(0, span * 1.08)
        marked = "a dotted line a day" if step == 1 else "a dotted line a week"
        ax.set_xlabel(f"hours from the start of the rental ({marked})")
        ax.grid(axis="y", visible=False)
        return svg(fig, "timeline")


# --- helpers ---------------------------------------------------------------------------------


@contextmanager
def style() -> Iterator[None]:
    with matplotlib.rc_context(RC):
        yield


def svg(fig: Figure, name: str) -> str:
    """The figure as an `<svg>` element (no XML prolog or doctype), its ids prefixed, with
    `role="img"` and an `aria-label` from its axes' titles and labels (a screen reader read
    the tick labels, "0 10 20 30"). The text is drawn by the browser (`svg.fonttype: none`),
    so matplotlib's warning of a glyph its own font lacks (an emoji label) is not shown."""
    buf = io.StringIO()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Glyph .* missing from font")
        fig.savefig(buf, format="svg", metadata=METADATA, bbox_inches="tight", pad_inches=0.08)
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    prefix = _slug(name)
    text = re.sub(r"<[^>]+>", lambda tag: _prefix_ids(tag.group(0), prefix), text)
    said = [
        t
        for ax in fig.axes
        for t in (*(ax.get_title(loc) for loc in ("left", "center", "right")), ax.get_xlabel())
        if t
    ]
    label = html.escape("; ".join(dict.fromkeys(said)) or name.replace("-", " "), quote=True)
    return text.replace("<svg", f'<svg role="img" aria-label="{label}"', 1)


def _prefix_ids(tag: str, prefix: str) -> str:
    """Ids and references to them inside one tag (text between tags is left alone)."""
    tag = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}-\1"', tag)
    tag = re.sub(r'href="#([^"]+)"', rf'href="#{prefix}-\1"', tag)
    return re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}-\1)", tag)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "figure"


def num(value: object, missing: float = math.nan) -> float:
    """A number for plotting; anything else (None, text) is a gap."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return missing
    return float(value)


def _dot(colour: str, label: str) -> Line2D:
    return Line2D([], [], marker="o", linestyle="", color=colour, label=label)
