"""`tunelab plan`'s record, event and views, on test_plan.py's reference lab of hand-made
records; and what a plan reads of an image lab, replicates and a noise floor."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from test_plan import add_check, add_run, make_lab, reference

from tunelab.core.durations import seconds
from tunelab.core.lab import open_records_lab
from tunelab.core.store import Store, read_json
from tunelab.stages.plan.records import PlanError
from tunelab.stages.plan.rental import run_plan
from tunelab.views.plan import plan as show_plan
from tunelab.views.plan import summary as show_summary


def test_the_plan_is_a_record_with_an_event(tmp_path):
    reference(tmp_path)
    (tmp_path / ".tunelab" / "plans").mkdir(parents=True)
    (tmp_path / ".tunelab" / "plans" / "p001.json").touch()  # reserved by another process
    record = run_plan(open_records_lab(tmp_path), days=7, price_per_hour=2.5)
    assert record["id"] == "p002"
    assert record["file"] == ".tunelab/plans/p002.json"
    assert read_json(tmp_path / record["file"]) == json.loads(json.dumps(record))
    event = Store(tmp_path).events()[-1]
    assert {k: event[k] for k in ("event", "plan", "days", "variants_fit", "cost")} == {
        "event": "plan",
        "plan": "p002",
        "days": 7,
        "variants_fit": 140,
        "cost": 420.0,
    }
    assert record["based_on"]["run"]["id"] == "r001-lora"
    assert record["based_on"]["check"]["file"] == ".tunelab/checks/v1-abc.json"
    assert record["based_on"]["data"]["counts"] == {"train": 1600, "validation": 100, "test": 200}


def test_the_view_shows_the_phases_stop_and_cost(tmp_path):
    record = run_plan(open_records_lab(reference(tmp_path)), days=7, price_per_hour=2.5)
    out = io.StringIO()
    show_plan(record, Console(file=out, width=120))
    text = out.getvalue()
    assert "plan p001: 7 days (168 h) on cpu, measured on cpu; 64.0 tokens/s" in text
    assert "variants: 140 fit, 1 h (3,600 s) each, 100 steps" in text
    assert "cost: 168 h × 2.5 per hour = 420.00" in text
    assert "saved to .tunelab/plans/p001.json" in text


def test_the_summary_shows_the_phases_stop_and_warnings_in_a_few_lines(tmp_path):
    record = run_plan(open_records_lab(reference(tmp_path)), days=30, price_per_hour=2.5)
    out = io.StringIO()
    show_summary(record, Console(file=out, width=200))
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        "plan p001: a 30-day rental on cpu at r001-lora's measured 64 tokens/s, so one variant "
        "of 100 steps takes 3,600 s (3,200 s training, 400 s evaluating and saving)"
    )
    assert lines[1] == (
        "  initial checks 1.25 h · experiments 610 h · evaluation 0.5 h · recovery buffer 108 h"
        " · export and verify 0.25 h"
    )
    assert lines[2].startswith("  stop: 610 variants of 100 steps (3,600 s each): start")
    assert lines[3] == "  cost: 720 h × 2.5 per hour = 1,800.00"
    assert [x for x in lines if x.startswith("  warning")] == [
        f"  warning {w}" for w in record["warnings"]
    ]
    assert lines[-1].endswith(".tunelab/plans/p001.json (and the lab report)")
    assert len(lines) == 5 + len(record["warnings"])


def test_an_image_lab_names_its_throughput_in_images_per_second(tmp_path):
    """An image lab's run counts images (`training.unit`): the plan's rate and step say so."""
    store = make_lab(tmp_path)
    add_run(store, unit="images")
    add_check(store)
    record = run_plan(open_records_lab(tmp_path), days=7)
    assert (record["throughput"]["tokens_per_s"], record["throughput"]["unit"]) == (64.0, "images")
    assert record["based_on"]["run"]["fields"]["unit"] == "images"
    step = record["based_on"]["figures"]["step_s"]["source"]
    assert step.startswith("2048 images per step (") and step.endswith(" / 64.0 images/s")
    out = io.StringIO()
    show_plan(record, Console(file=out, width=120))
    assert "measured on cpu; 64.0 images/s" in out.getvalue()


def test_replicates_and_a_noise_floor_take_their_runs_from_the_experiments(tmp_path):
    plain = run_plan(open_records_lab(reference(tmp_path / "plain")), days=3)
    floor = run_plan(open_records_lab(reference(tmp_path / "floor", noise=False)), days=3)
    seeded = run_plan(open_records_lab(reference(tmp_path / "seeded", seeds=3)), days=3)
    runs = plain["variants"]["fit"]
    assert floor["variants"]["noise_runs"] == 2 and floor["variants"]["fit"] == runs - 2
    assert "`tunelab noise` first (2 more seeds" in floor["phases"][1]["what"]
    assert seeded["variants"]["noise_runs"] == 0  # replicates give every arm its own seeds
    assert seeded["variants"]["fit"] == runs // 3 and seeded["variants"]["seeds"] == 3
    assert f"up to {runs // 3} variants × 3 seeds" in seeded["phases"][1]["what"]


def test_a_plan_made_with_overrides_records_them_and_says_it_is_a_what_if(tmp_path):
    from tunelab.stages.report.sections import plan as report_plan

    reference(tmp_path)
    lab = open_records_lab(tmp_path, {"training.budget.steps": 50})
    record = run_plan(lab, days=7)
    assert record["overrides"] == {"training.budget.steps": 50}
    out = io.StringIO()
    show_plan(record, Console(file=out, width=200))
    assert "a what-if, with training.budget.steps=50" in out.getvalue()
    assert report_plan(Store(tmp_path))["overrides"] == {"training.budget.steps": 50}
    assert run_plan(open_records_lab(tmp_path), days=7)["overrides"] == {}


def test_a_what_if_of_another_model_is_not_timed_at_the_measured_ones_speed(tmp_path):
    """`plan model.arch.hidden_size=2048 ...` timed a 1.6B-parameter model at a 4-layer
    model's measured tokens per second: "45 variants fit" where none would."""
    reference(tmp_path)
    bigger = open_records_lab(tmp_path, {"method.type": "full"})
    with pytest.raises(PlanError, match=r"another model than run r001-lora measured \(method"):
        run_plan(bigger, days=7)
    given = run_plan(bigger, days=7, tokens_per_second=500.0)
    assert any("its memory was not sized" in w for w in given["warnings"])
    # the same model at another microbatch, or LoRA rank: planned, the change named
    smaller = run_plan(open_records_lab(tmp_path, {"training.microbatch": 4}), days=7)
    (warning,) = [w for w in smaller["warnings"] if "other settings" in w]
    assert "training.microbatch 16 -> 4" in warning
    ranked = run_plan(open_records_lab(tmp_path, {"method.r": 32}), days=7)
    assert any("method.r 8 -> 32" in w for w in ranked["warnings"])
    # a run of the model asked for is preferred to a newer one of another
    add_run(make_lab(tmp_path), "full")  # the newest, and (say) a full fine-tune
    record = read_json(tmp_path / ".tunelab" / "runs" / "r002-full" / "record.json")
    record["spec"]["method"]["type"] = "full"
    Store(tmp_path).write_record("r002-full", record)
    assert run_plan(open_records_lab(tmp_path), days=7)["based_on"]["run"]["id"] == "r001-lora"
    # a run named with no what-if is planned as it trained
    assert run_plan(open_records_lab(tmp_path), days=7, run_id="r001-lora")["variants"]["fit"]


def test_a_runs_time_counts_from_its_process_start_where_the_cli_marked_it(tmp_path, monkeypatch):
    """`ended - created` left out the imports, the model's load and a probe head's fit: a
    variant planned at 77 s took 89 s (and a first run 139 s against 84)."""
    from tunelab.core import env, ledger

    store = make_lab(tmp_path)
    add_check(store)
    add_run(store)  # open 00:00 to 01:00, 3,200 s training: 400 s outside it
    plain = run_plan(open_records_lab(tmp_path), days=7)["based_on"]["figures"]["overhead_s"]
    assert plain == {"seconds": 400.0, "source": "r001-lora ended - created - training.seconds"}
    record = read_json(tmp_path / ".tunelab" / "runs" / "r001-lora" / "record.json")
    record["process"] = {"started": "2025-12-31T23:59:15+00:00"}  # 45 s before it opened
    Store(tmp_path).write_record("r001-lora", record)
    counted = run_plan(open_records_lab(tmp_path), days=7)["based_on"]["figures"]["overhead_s"]
    assert counted["seconds"] == 445.0 and "ended - process.started -" in counted["source"]
    monkeypatch.setattr(ledger, "fingerprint", lambda device: {})  # a records lab has none
    env._COMMAND_STARTED[:] = ["2026-01-01T00:00:00+00:00"]  # the CLI marks its process
    try:
        opened, _ = ledger.open_run(open_records_lab(tmp_path), "next", "variant", "v1")
    finally:
        env._COMMAND_STARTED.clear()
    assert opened["process"]["started"] == "2026-01-01T00:00:00+00:00"
    from datetime import datetime, timedelta, timezone

    env.mark_command_start()  # this test process's own start, read from /proc
    try:
        started = datetime.fromisoformat(env.command_started())
    finally:
        env._COMMAND_STARTED.clear()
    assert timedelta(0) <= datetime.now(timezone.utc) - started < timedelta(hours=6)


def test_a_run_at_another_global_batch_is_said_to_be_scaled(tmp_path):
    """`4024 tokens per step (r006 ... at global batch 16)` for a run at batch 20 read as if it
    had trained at 16; and a short variant read "0.002 h (8 s)" beside "8.33 s each"."""
    reference(tmp_path)
    lab = open_records_lab(tmp_path, {"training.global_batch": 32})
    source = run_plan(lab, days=7)["based_on"]["figures"]["step_s"]["source"]
    assert "(r001-lora training.tokens / training.steps at its global batch 16, scaled to 32)" in (
        source
    )
    # the plan's lines give one variant's seconds by one rule (tests/unit/core/test_durations.py)
    record = run_plan(lab, days=7)
    out = io.StringIO()
    show_plan(record, Console(file=out, width=400))
    shown = seconds(record["variants"]["seconds_each"], hours=False)
    assert f"({shown}) each" in out.getvalue() and f"({shown} each)" in out.getvalue()
