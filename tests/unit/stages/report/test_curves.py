"""The loss curves of a lab with many runs: the newest named, the earlier ones grey."""

import warnings

from tunelab.stages.report.charts import run_colours
from tunelab.stages.report.curves import NAMED, curves


def test_a_lab_of_many_runs_names_the_newest_and_greys_the_rest():
    """At 125 runs the legend of every run covered both axes and matplotlib collapsed them
    ('constrained_layout not applied because axes sizes collapsed to zero')."""
    ids = [f"r{i:03d}-lr" for i in range(1, 126)]
    history = [{"step": s, "loss": 2.0 / s, "lr": 1e-3} for s in range(1, 6)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the collapsed layout was a UserWarning
        page = curves([(i, history) for i in ids], run_colours(ids))
    assert f"{125 - NAMED} earlier runs" in page
    assert all(i in page for i in ids[-NAMED:]) and ids[0] not in page
    few = curves([(i, history) for i in ids[:3]], run_colours(ids[:3]))
    assert "earlier runs" not in few and all(i in few for i in ids[:3])


def test_a_run_whose_loss_blew_up_leaves_the_scale_and_the_others_stay_readable():
    """A learning rate of 1e6 took one run's loss to 3.3e6, then NaN: the axis ran to 3.5e6
    and the other run's curve was a flat line at zero."""
    import math

    from tunelab.stages.report.curves import loss_limits

    calm = [{"step": s, "loss": 1.2 / s, "lr": 1e-3} for s in range(1, 9)]
    blown = [{"step": 1, "loss": 0.9, "lr": 1e6}, {"step": 2, "loss": 3.3e6, "lr": 1e6}]
    blown += [{"step": s, "loss": math.nan, "lr": 1e6} for s in range(3, 9)]
    runs = [("r003-lora", calm), ("r004-nan", blown)]
    bottom, ceiling = loss_limits(runs)
    assert 1.2 < ceiling < 2.0  # just above the calm run's losses
    # and just below them: matplotlib's own margin under the blown-up run's range had run
    # the axis down to -275,000, every other curve a line at its top
    assert 0.05 < bottom < 1.2 / 8
    page = curves(runs, run_colours(["r003-lora", "r004-nan"]))
    assert "r004-nan (off the scale) (its loss stopped being a number)" in page
    assert "r003-lora (off" not in page and loss_limits([runs[0]]) is None


def test_named_runs_take_turns_of_line_style_not_only_colour():
    from tunelab.stages.report.curves import STYLES

    history = [{"step": s, "loss": 1.0 / s, "lr": 1e-3} for s in range(1, 4)]
    ids = [f"r00{i}-x" for i in range(1, 4)]
    page = curves([(i, history) for i in ids], run_colours(ids))
    assert len(STYLES) >= 3 and page.count("stroke-dasharray") >= 2  # dotted, dash-dotted


def test_a_figure_is_an_image_with_a_label_and_an_emoji_label_warns_of_no_glyph():
    """A screen reader read the tick labels; an emoji label printed matplotlib's glyph warning
    on stderr (the browser draws the text, not matplotlib's font)."""
    history = [{"step": s, "loss": 1.0 / s, "lr": 1e-3} for s in range(1, 4)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        page = curves([("r001-sport ⚽ 娱乐", history)], run_colours(["r001-sport ⚽ 娱乐"]))
    assert page.startswith('<svg role="img" aria-label="training loss; step; learning rate"')


def test_a_run_that_stopped_is_drawn_as_far_as_it_wrote_its_history(tmp_path):
    """An interrupted run's 23 steps were on no curve: its record keeps no `training`, and
    its history.jsonl (a line a step, the last one cut by the kill) was not read."""
    import json

    from tunelab.core.store import Store
    from tunelab.stages.report.sections import curves as section

    store = Store(tmp_path)
    folder = store.runs_dir / "r004-long"
    folder.mkdir(parents=True)
    lines = [json.dumps({"step": s, "loss": 2.0 / s, "lr": 1e-3}) for s in range(1, 24)]
    (folder / "history.jsonl").write_text("\n".join(lines) + '\n{"step": 24, "lo')
    done = {
        "id": "r003-lora",
        "status": "completed",
        "training": {"history": [{"step": 1, "loss": 1.0, "lr": 1e-3}]},
    }
    stopped = {"id": "r004-long", "status": "interrupted"}
    page = section([done, stopped], run_colours(["r003-lora", "r004-long"]), store)
    assert "r004-long (interrupted)" in page and "r003-lora" in page
    # killed (-9): recorded as running by a process that is gone, drawn as `runs` says it
    import socket

    gone = {"host": socket.gethostname(), "pid": 2**22 + 1}  # above Linux's largest pid
    killed = stopped | {"status": "running", "process": gone, "updated": "2026-01-01T00:00:00Z"}
    assert "r004-long (lost)" in section([killed], run_colours(["r004-long"]), store)
    assert (
        section([stopped | {"id": "r005-x"}], run_colours(["r005-x"]), store) is None
    )  # none written
