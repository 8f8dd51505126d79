"""The report's loss curves: training loss and learning rate against the step, one line per run,
with the validation loss of the runs that measured it as they trained.

A lab lived in for weeks holds a hundred runs or more, and a legend of every one covered both
axes (123 entries at 125 runs; matplotlib then collapsed the axes to nothing). The newest
`NAMED` runs are drawn in their colours and named; the earlier ones are thin grey lines under
them, one legend entry for all of them.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from tunelab.stages.report.charts import WIDTH, num, style, svg

NAMED = 10
"""The newest runs a curve names and colours; the earlier ones are grey."""

EARLIER = "#c7cbd1"


def curves(histories: list[tuple[str, list[dict]]], colours: dict[str, str]) -> str:
    """Training loss and learning rate against the step, one line per run (the newest
    `NAMED` in colour), and the validation loss of the runs that measured it during training
    (dashed, a dot per measurement)."""
    earlier, named = histories[:-NAMED], histories[-NAMED:]
    with style():
        fig = Figure(figsize=(WIDTH, 3.8), layout="constrained")
        loss_ax, lr_ax = fig.subplots(1, 2)
        for _, history in earlier:
            steps = [num(h.get("step")) for h in history]
            grey = {"color": EARLIER, "linewidth": 0.8, "zorder": 1}
            loss_ax.plot(steps, [num(h.get("loss")) for h in history], **grey)
            lr_ax.plot(steps, [num(h.get("lr")) for h in history], **grey)
        validated = False
        for run_id, history in named:
            steps = [num(h.get("step")) for h in history]
            line = {"color": colours.get(run_id), "linewidth": 1.6, "label": run_id, "zorder": 2}
            loss_ax.plot(steps, [num(h.get("loss")) for h in history], **line)
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
        lr_ax.set(title="learning rate", xlabel="step")
        lr_ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        handles, labels = loss_ax.get_legend_handles_labels()
        if earlier:
            handles.append(Line2D([], [], color=EARLIER, linewidth=0.8))
            labels.append(f"{len(earlier)} earlier runs")
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 5))
        return svg(fig, "curves")
