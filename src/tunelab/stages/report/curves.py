"""The report's loss curves: training loss and learning rate against the step, one line per run,
with the validation loss of the runs that measured it as they trained.

A lab lived in for weeks holds a hundred runs or more, and a legend of every one covered both
axes (123 entries at 125 runs; matplotlib then collapsed the axes to nothing). The newest
`NAMED` runs are drawn in their colours and named; the earlier ones are thin grey lines under
them, one legend entry for all of them. The named runs take turns of line style as well as
colour, so that they are told apart without colour.

One run whose loss blew up (a learning rate of 1e6 took it to 3.3e6) flattened every other
curve to a line at zero: where a run's loss goes past ten times the highest loss any run began
at, the axis ends just above the losses within that, and the run's legend entry says it left
the scale.
"""

from __future__ import annotations

import math

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from tunelab.stages.report.charts import WIDTH, num, style, svg

NAMED = 10
"""The newest runs a curve names and colours; the earlier ones are grey."""

EARLIER = "#c7cbd1"
STYLES = ("-", ":", "-.", (0, (5, 1, 1, 1, 1, 1)))
"""The named runs' line styles, in turn (dashes alone are the validation loss's)."""
OFF_SCALE = 10
"""A loss past this many times the highest first loss of the runs drawn leaves the axis."""


def loss_limits(histories: list[tuple[str, list[dict]]]) -> tuple[float, float] | None:
    """The loss axis's ends when a run's loss goes far past where every run began: from just
    below the lowest loss to just above the highest within `OFF_SCALE` times the highest
    first loss (None: matplotlib's own). A run starts at its highest loss as a rule, so the
    others' curves are drawn whole; the bottom is set too, since matplotlib's margin below the
    blown-up run's range had run the axis to -275,000."""
    finite = [
        [x for x in (num(h.get("loss")) for h in history) if math.isfinite(x)]
        for _, history in histories
    ]
    starts = [losses[0] for losses in finite if losses]
    if not starts or max(starts) <= 0:
        return None
    bound = OFF_SCALE * max(starts)
    within = [x for losses in finite for x in losses if x <= bound]
    if all(x <= bound for losses in finite for x in losses):
        return None
    low, high = min(within), max(within)
    margin = 0.05 * (high - low)
    return low - margin, 1.15 * high


def curves(
    histories: list[tuple[str, list[dict]]],
    colours: dict[str, str],
    stopped: dict[str, str] | None = None,
) -> str:
    """Training loss and learning rate against the step, one line per run (the newest
    `NAMED` in colour), and the validation loss of the runs that measured it during training
    (dashed, a dot per measurement); a run in `stopped` is labelled with its status (its
    history as far as it was written)."""
    earlier, named = histories[:-NAMED], histories[-NAMED:]
    stopped = stopped or {}
    limits = loss_limits(histories)
    ceiling = limits[1] if limits else None
    with style():
        fig = Figure(figsize=(WIDTH, 3.8), layout="constrained")
        loss_ax, lr_ax = fig.subplots(1, 2)
        for _, history in earlier:
            steps = [num(h.get("step")) for h in history]
            grey = {"color": EARLIER, "linewidth": 0.8, "zorder": 1}
            loss_ax.plot(steps, [num(h.get("loss")) for h in history], **grey)
            lr_ax.plot(steps, [num(h.get("lr")) for h in history], **grey)
        validated = False
        for turn, (run_id, history) in enumerate(named):
            steps = [num(h.get("step")) for h in history]
            losses = [num(h.get("loss")) for h in history]
            left = ceiling is not None and any(x > ceiling for x in losses if math.isfinite(x))
            gone = any(
                isinstance(h.get("loss"), float) and not math.isfinite(h["loss"]) for h in history
            )
            label = run_id + (f" ({stopped[run_id]})" if run_id in stopped else "")
            label += " (off the scale)" if left else ""
            label += " (its loss stopped being a number)" if gone else ""
            line = {
                "color": colours.get(run_id),
                "linewidth": 1.6,
                "label": label,
                "zorder": 2,
                "linestyle": STYLES[turn % len(STYLES)],
            }
            loss_ax.plot(steps, losses, **line)
            lr_ax.plot(steps, [num(h.get("lr")) for h in history], **line)
            measured = [h for h in history if h.get("validation_loss") is not None]
            if measured:  # `training.validate_every`: the validation loss, dashed with dots
                validated = True
                loss_ax.plot(
                    [num(h["step"]) for h in measured],
                    [num(h["validation_loss"]) for h in measured],
                    color=colours.get(run_id),
                    linewidth=1.2,
                    linestyle="--",
                    marker="o",
                    markersize=3,
                    zorder=2,
                )
        title = "training loss (validation loss dashed)" if validated else "training loss"
        loss_ax.set(title=title, xlabel="step")
        if limits is not None:
            loss_ax.set_ylim(*limits)
        lr_ax.set(title="learning rate", xlabel="step")
        lr_ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        handles, labels = loss_ax.get_legend_handles_labels()
        if earlier:
            handles.append(Line2D([], [], color=EARLIER, linewidth=0.8))
            labels.append(f"{len(earlier)} earlier runs")
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 5))
        return svg(fig, "curves")
