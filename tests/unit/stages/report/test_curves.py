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
