"""`tunelab plan`: which run it measures from, on hand-made records (no models): the one
`--run` names, else the best-ranked completed variant (`records.reference_run`)."""

from __future__ import annotations

import pytest
from test_plan import add_check, add_run, make_lab

from tunelab.core.errors import TunelabError
from tunelab.core.lab import open_records_lab
from tunelab.stages.plan.rental import run_plan


def test_the_run_measured_on_the_target_device_is_preferred(tmp_path):
    store = make_lab(tmp_path)
    cpu_run = add_run(store, "cpu")
    add_run(
        store, "gpu", seconds=320, wall="00:06:00", device={"type": "cuda", "name": "NVIDIA H100"}
    )
    add_check(store)
    record = run_plan(open_records_lab(tmp_path), days=7, device="cpu")
    assert record["based_on"]["run"]["id"] == cpu_run
    record = run_plan(open_records_lab(tmp_path), days=7, device="h100")
    assert record["based_on"]["run"]["id"] == "r002-gpu"
    assert (record["measured_on"], record["throughput"]["tokens_per_s"]) == ("cuda", 640.0)


def test_a_newer_run_of_other_settings_is_passed_over_for_one_of_the_spec_s(tmp_path):
    """A quick what-if run (4 tokens, a batch of 1), newer than the runs at the spec's own
    length and batch, had timed every variant of the plan at its own speed: 30 times slow."""
    store = make_lab(tmp_path)
    spec_run = add_run(store, "lora")
    quick = add_run(store, "quick", seconds=320)
    record = store.read_record(quick)
    record["spec"]["training"] |= {"global_batch": 1, "microbatch": 1}
    store.write_record(quick, record)
    add_check(store)
    planned = run_plan(open_records_lab(tmp_path), days=7)
    assert planned["based_on"]["run"]["id"] == spec_run
    assert not any("other settings" in w for w in planned["warnings"])


def test_a_named_run_is_used_instead_of_the_newest(tmp_path):
    store = make_lab(tmp_path)
    chosen = add_run(store, "chosen")
    add_run(store, "ablation", seconds=1600, wall="00:30:00")  # newer, twice as fast
    add_check(store)
    default = run_plan(open_records_lab(tmp_path), days=7)
    named = run_plan(open_records_lab(tmp_path), days=7, run_id=chosen)
    assert default["based_on"]["run"]["id"] == "r002-ablation"
    assert default["based_on"]["run"]["chosen"].startswith("the best-ranked completed variant")
    assert (named["based_on"]["run"]["id"], named["based_on"]["run"]["chosen"]) == (
        chosen,
        "named (--run)",
    )
    assert named["throughput"]["tokens_per_s"] == 64.0  # r001's 204,800 tokens in 3,200 s
    assert named["variants"]["fit"] < default["variants"]["fit"]


def test_a_run_stopped_and_resumed_is_not_chosen_over_one_that_trained_straight(tmp_path):
    """A resumed run's `ended - created` holds the time it sat stopped: chosen by itself, one
    paused 5 s took overhead_s from 0.57 s to 10.2 s and the variants that fit tenfold down."""
    store = make_lab(tmp_path)
    straight = add_run(store, "straight")
    paused = add_run(store, "paused", wall="02:00:00")  # newer, but an hour sat stopped
    record = store.read_record(paused)
    store.write_record(paused, record | {"resumed": [{"time": "2026-01-01T01:50:00+00:00"}]})
    add_check(store)
    default = run_plan(open_records_lab(tmp_path), days=7)
    assert default["based_on"]["run"]["id"] == straight
    named = run_plan(open_records_lab(tmp_path), days=7, run_id=paused)
    assert any("was stopped and resumed" in w for w in named["warnings"])


def test_a_named_run_that_cannot_be_measured_from_is_refused(tmp_path):
    store = make_lab(tmp_path)
    baseline = add_run(store, "probe", kind="baseline")
    add_run(store)
    lab = open_records_lab(tmp_path)
    with pytest.raises(TunelabError, match=r"--run r009: no such run .*its variants: r002-lora"):
        run_plan(lab, days=7, run_id="r009")
    with pytest.raises(TunelabError, match=rf"--run {baseline}: .* a completed baseline"):
        run_plan(lab, days=7, run_id=baseline)
