"""`tunelab plan`: the phases' arithmetic on a fixed set of hand-made records (no models).

The reference lab: a variant of 100 steps that took 3,200 s of training (32 s a step, 64
tokens/s at 2,048 tokens a step) and 3,600 s from open to close (400 s evaluating 100
validation rows: 4 s a row); a check of 900 s whose fresh-process reload took 180 s; 200 test
rows. So: checks 3,600 + 900 s = 1.25 h; final 200 × 4 + 180 = 980 s -> 0.5 h; export 180 s +
verify 180 + 100 × 4 = 760 s -> 0.25 h; a variant 100 × 32 + 400 = 3,600 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tunelab.core.errors import TunelabError
from tunelab.core.lab import open_records_lab
from tunelab.core.spec import validate_spec
from tunelab.core.store import Store, atomic_write_json
from tunelab.stages.plan.rental import run_plan

PHASES = ["initial checks", "experiments", "evaluation", "recovery buffer", "export and verify"]
CPU = {"type": "cpu", "name": "x86_64", "count": 1}


def make_lab(
    tmp_path: Path,
    test_rows: int = 200,
    rental: dict | None = None,
    noise: bool = True,
    seeds: int = 1,
) -> Store:
    """A lab with one data version; `noise`: it has a noise floor already (so the plan
    reserves no runs for one); `seeds`: training.replicates."""
    raw = {
        "guardrails": [{"metric": "accuracy", "scope": "overall", "max_drop": 0.05}],
        "data": {"sources": [{"type": "jsonl", "path": "d"}]},
        "model": {"path": "m"},
        "training": {
            "global_batch": 16,
            "microbatch": 16,
            "budget": {"steps": 100},
            "replicates": seeds,
        },
        **({"rental": rental} if rental else {}),
    }
    validate_spec(raw)
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "tunelab.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    store = Store(tmp_path)
    counts = {"train": {"n": 1600}, "validation": {"n": 100}, "test": {"n": test_rows}}
    atomic_write_json(store.data_dir("v1") / "manifest.json", {"labels": ["a"], "counts": counts})
    store.set_current_data("v1")
    if noise:
        atomic_write_json(store.root / "noise" / "n001.json", {"id": "n001", "runs": []})
    return store


def add_run(
    store: Store,
    name: str = "lora",
    kind: str = "variant",
    seconds: float = 3200,
    wall: str = "01:00:00",
    device: dict = CPU,
    unit: str | None = None,
) -> str:
    """A completed run of 100 steps of 2,048 tokens in `seconds`, open from 00:00 to `wall`;
    `unit`: what its `training.tokens` count, when the record says (an image lab's: images)."""
    run_id, _ = store.new_run(name)
    spec = validate_spec(yaml.safe_load((store.lab / "tunelab.yaml").read_text()))
    training = {"steps": 100, "seconds": seconds, "tokens": 204800, "global_batch": 16}
    if unit is not None:
        training["unit"] = unit
    store.write_record(
        run_id,
        {
            "id": run_id,
            "kind": kind,
            "status": "completed",
            "data_version": "v1",
            "created": "2026-01-01T00:00:00+00:00",
            "ended": f"2026-01-01T{wall}+00:00",
            "spec": spec.to_dict(),
            "env": {"device": device},
            "metrics": {"n": 100},
            **({"training": training | {"tokens_per_s": 204800 / seconds}} if kind else {}),
        },
    )
    return run_id


def add_check(store: Store, seconds: float = 900, reload: float = 180) -> None:
    atomic_write_json(
        store.root / "checks" / "v1-abc.json",
        {
            "passed": True,
            "seconds": seconds,
            "created": "2026-01-01T00:00:00+00:00",
            "env": {"device": CPU},
            "items": [
                {"name": "evaluation", "seconds": 2.0},
                {"name": "reload", "seconds": reload},
            ],
        },
    )


def reference(tmp_path: Path, **lab) -> Path:
    store = make_lab(tmp_path, **lab)
    add_run(store)
    add_check(store)
    return tmp_path


def hours(record: dict) -> list[float]:
    assert [p["name"] for p in record["phases"]] == PHASES
    return [p["hours"] for p in record["phases"]]


@pytest.mark.parametrize(
    ("days", "phases", "fit"),
    [
        (3, [1.25, 59.0, 0.5, 11.0, 0.25], 59),
        (7, [1.25, 140.75, 0.5, 25.25, 0.25], 140),
        (30, [1.25, 610.0, 0.5, 108.0, 0.25], 610),
    ],
)
def test_phases_add_up_to_the_rental_and_the_variants_fill_the_experiments(
    tmp_path, days, phases, fit
):
    record = run_plan(open_records_lab(reference(tmp_path)), days=days)
    assert record["hours_total"] == days * 24
    assert hours(record) == phases
    assert sum(hours(record)) == record["hours_total"]  # exact, not close
    assert record["variants"]["fit"] == fit
    assert record["variants"]["steps_each"] == 100
    assert record["variants"]["hours_each"] == 1.0
    assert record["warnings"] == []
    ends = [p["end_hour"] for p in record["phases"]]
    assert ends[-1] == days * 24
    assert record["variants"]["last_start_hour"] == ends[1] - 1.0


def test_the_buffer_follows_its_rule(tmp_path):
    record = run_plan(open_records_lab(reference(tmp_path)), days=7)
    buffer = record["phases"][3]
    # max(15% of 168 h = 25.2 h, one variant 1 h + a reload 180 s), up to the quarter hour
    assert record["buffer_rule"]["hours"] == 25.2
    assert buffer["hours"] == 25.25
    assert "90,720 s (25.2 h)" in buffer["based_on"]


def test_a_variant_longer_than_15_percent_sets_the_buffer(tmp_path):
    lab = open_records_lab(reference(tmp_path), {"training.budget.steps": 1500})
    record = run_plan(lab, days=3)
    # one variant: 1,500 × 32 + 400 = 48,400 s; + reload 180 = 48,580 s -> 54 quarters
    assert record["phases"][3]["hours"] == 13.5
    assert record["variants"]["seconds_each"] == 48400.0
    assert record["variants"]["fit"] == 4  # (72 - 2 - 13.5) h = 203,400 s / 48,400 s
    assert record["variants"]["steps_source"] == "training.budget.steps"


def test_slower_steps_fit_fewer_variants(tmp_path):
    store = make_lab(tmp_path)
    add_run(store, seconds=6400, wall="01:53:20")  # 64 s a step; 6,800 s open: 400 s overhead
    add_check(store)
    record = run_plan(open_records_lab(tmp_path), days=7)
    assert record["throughput"]["tokens_per_s"] == 32.0
    assert record["variants"]["seconds_each"] == 6800.0
    assert record["variants"]["fit"] == 74  # 140.75 h = 506,700 s / 6,800 s = 74.5
    assert record["based_on"]["figures"]["step_s"]["seconds"] == 64.0


def test_cost_is_hours_times_price_and_defaults_come_from_the_rental_section(tmp_path):
    reference(tmp_path, rental={"days": 3, "device": "cpu", "price_per_hour": 1.5})
    assert run_plan(open_records_lab(tmp_path), days=7, price_per_hour=2.5)["cost"] == 420.0
    record = run_plan(open_records_lab(tmp_path))
    assert (record["days"], record["hours_total"], record["cost"]) == (3, 72.0, 108.0)
    assert record["price_per_hour"] == 1.5


def test_no_price_no_cost(tmp_path):
    record = run_plan(open_records_lab(reference(tmp_path)), days=7)
    assert (record["price_per_hour"], record["cost"]) == (None, None)


def test_another_device_is_refused_without_a_measured_throughput(tmp_path):
    lab = open_records_lab(reference(tmp_path))
    with pytest.raises(TunelabError, match=r"does not guess.*--tokens-per-second T"):
        run_plan(lab, days=7, device="cuda")
    assert not (tmp_path / ".tunelab" / "plans" / "p001.json").exists()


def test_another_device_with_a_given_throughput_is_accepted_and_recorded(tmp_path):
    record = run_plan(
        open_records_lab(reference(tmp_path)), days=7, device="H100", tokens_per_second=128
    )
    assert (record["device"], record["measured_on"]) == ("H100", "cpu")
    t = record["throughput"]
    assert (t["tokens_per_s"], t["given"], t["measured_tokens_per_s"]) == (128.0, 128, 64.0)
    assert t["source"].startswith("given (--tokens-per-second)")
    # 16 s a step; a faster device does not shorten the 400 s overhead: 1,600 + 400 s a variant
    assert record["variants"]["seconds_each"] == 2000.0
    assert record["variants"]["fit"] == 253  # 506,700 s / 2,000 s
    event = Store(tmp_path).events()[-1]
    assert (event["tokens_per_s"], event["device"]) == (128.0, "H100")
    # what it did not measure there is said: memory, and every time but the training speed
    assert any(w.startswith("memory on H100 is not measured") for w in record["warnings"])
    assert any(
        w.startswith("the start-up, evaluation, final and export times are cpu's")
        for w in record["warnings"]
    )
    same = run_plan(open_records_lab(reference(tmp_path)), days=7)
    assert not any("is not measured" in w for w in same["warnings"])


def test_a_slower_given_throughput_stretches_every_measured_duration(tmp_path):
    record = run_plan(
        open_records_lab(reference(tmp_path)), days=7, device="cuda", tokens_per_second=32
    )
    assert record["throughput"]["duration_scale"] == 2.0
    # checks 3,600 + 1,800 s; final 200 × 8 + 360 s; export 360 + verify 360 + 800 s
    assert hours(record) == [1.5, 140.0, 0.75, 25.25, 0.5]
    assert record["variants"]["fit"] == 70  # 504,000 s / (100 × 64 + 800) s


def test_a_too_short_rental_warns_that_the_variants_do_not_fit(tmp_path):
    lab = open_records_lab(reference(tmp_path), {"training.budget.steps": 4000})
    record = run_plan(lab, days=3)
    # a variant: 4,000 × 32 + 400 = 128,400 s = 35.67 h; the buffer keeps its rule (35.75 h)
    assert hours(record) == [1.25, 34.25, 0.5, 35.75, 0.25]
    assert record["variants"]["fit"] == 0
    assert record["variants"]["last_start_hour"] is None
    assert len(record["warnings"]) == 1
    assert record["warnings"][0].startswith("the variants do not fit")


def test_a_rental_far_longer_than_the_search_says_so(tmp_path):
    # a variant of 10 steps: 10 × 32 + 400 = 720 s; 59 h of experiments hold 295 of them
    record = run_plan(open_records_lab(reference(tmp_path), {"training.budget.steps": 10}), days=3)
    assert (record["variants"]["fit"], record["warnings"]) == (295, [])
    # 30 days: 610 h hold 3,050: far more than a one-change-at-a-time search needs
    record = run_plan(open_records_lab(reference(tmp_path), {"training.budget.steps": 10}), days=30)
    assert record["variants"]["fit"] == 3050
    assert record["warnings"] == [
        "3,050 variants of 720 s fit: far more than a one-change-at-a-time search needs, so "
        "most of this rental would sit idle; a larger budget per variant (training.budget: more "
        "steps, more data) or a larger model is what such a rental is for, or run the search "
        "where it was measured"
    ]
    assert "up to 3,050 variants of the current budget" in record["phases"][1]["what"]


def test_a_short_buffer_and_no_buffer_warn(tmp_path):
    # 60,800 test rows × 4 s + 180 s -> 67.75 h of final evaluation; 2.75 h left for the buffer
    record = run_plan(open_records_lab(reference(tmp_path / "short", test_rows=60800)), days=3)
    assert hours(record) == [1.25, 0.0, 67.75, 2.75, 0.25]
    assert record["warnings"][0].startswith(
        "the recovery buffer is 2.75 h, short of its rule's 11 h"
    )
    # 63,400 rows -> 70.5 h: the fixed phases take the whole rental
    record = run_plan(open_records_lab(reference(tmp_path / "none", test_rows=63400)), days=3)
    assert hours(record) == [1.25, 0.0, 70.5, 0.0, 0.25]
    assert record["warnings"][0].startswith("the plan has no recovery buffer")
    assert record["warnings"][1].startswith("the variants do not fit")


def test_fixed_phases_longer_than_the_rental_are_refused(tmp_path):
    lab = open_records_lab(reference(tmp_path, test_rows=64000))
    with pytest.raises(TunelabError, match="shorter than its fixed phases alone"):
        run_plan(lab, days=3)


def test_export_and_verify_records_are_used_when_they_exist(tmp_path):
    reference(tmp_path)
    folder = tmp_path / ".tunelab" / "exports"
    atomic_write_json(folder / "1-r001-lora.json", {"seconds": 1200, "verified": {"seconds": 600}})
    record = run_plan(open_records_lab(tmp_path), days=7)
    assert hours(record) == [1.25, 140.5, 0.5, 25.25, 0.5]
    figures = record["based_on"]["figures"]
    assert figures["export_s"] == {
        "seconds": 1200.0,
        "source": ".tunelab/exports/1-r001-lora.json seconds",
    }
    assert figures["verify_s"]["source"] == ".tunelab/exports/1-r001-lora.json verified.seconds"
    # a later bundle never verified: the pair stays one bundle's, not its export beside
    # another bundle's verify
    atomic_write_json(folder / "2-r001-lora.json", {"seconds": 64.6, "verified": None})
    figures = run_plan(open_records_lab(tmp_path), days=7)["based_on"]["figures"]
    assert figures["export_s"]["seconds"] == 1200.0 and figures["verify_s"]["seconds"] == 600.0


def test_a_final_is_timed_from_the_run_s_evaluation_not_its_whole_overhead(tmp_path):
    """eval_row_s was the run's whole time outside its steps (its model's load, its saving)
    over the validation rows, so a final on a test split larger than validation counted the
    load once per row: 62 s planned against 6.2 s measured. A run records its evaluation's
    seconds: 40 s for 100 rows here, so the final is 200 × 0.4 + the reload's 180 s."""
    store = make_lab(tmp_path)
    run_id = add_run(store)
    record = store.read_record(run_id) | {"evaluation_seconds": 40.0}
    store.write_record(run_id, record)
    add_check(store)
    figures = run_plan(open_records_lab(tmp_path), days=7)["based_on"]["figures"]
    assert figures["eval_row_s"] == {
        "seconds": 0.4,
        "source": "r001-lora evaluation_seconds / the 100 rows it evaluated",
    }
    assert figures["final_s"]["seconds"] == 200 * 0.4 + 180
    assert figures["verify_s"]["seconds"] == 180 + 100 * 0.4


def test_without_a_check_the_run_stands_in_and_it_says_so(tmp_path):
    add_run(make_lab(tmp_path))
    record = run_plan(open_records_lab(tmp_path), days=7)
    # checks: the allowance only; reload = the run's 400 s overhead
    assert hours(record) == [1.0, 140.75, 0.5, 25.25, 0.5]
    assert record["based_on"]["check"] is None
    assert record["warnings"][0].startswith("no `tunelab check` record measured on cpu")


def test_without_a_completed_variant_it_says_to_check_and_run_first(tmp_path):
    store = make_lab(tmp_path)
    add_run(store, name="probe", kind="baseline")
    with pytest.raises(TunelabError, match=r"`tunelab check` and one `tunelab run` first"):
        run_plan(open_records_lab(tmp_path), days=7)


def test_bad_inputs_are_refused(tmp_path):
    lab = open_records_lab(reference(tmp_path))
    with pytest.raises(TunelabError, match="3, 7 or 30 days"):
        run_plan(lab, days=5)
    with pytest.raises(TunelabError, match="positive rate"):
        run_plan(lab, days=7, tokens_per_second=0)


def test_a_device_name_matches_whole_words_of_the_measured_device():
    from tunelab.stages.plan.records import same_device

    gpu = {"type": "cuda", "name": "NVIDIA H100 80GB HBM3"}
    assert same_device("cuda:1", gpu) and same_device("H100", gpu)
    assert same_device("nvidia h100", gpu) and not same_device("H10", gpu)
    cpu = {"type": "cpu", "name": "x86_64"}
    assert same_device("cpu", cpu) and not same_device("x86", cpu) and not same_device("6", cpu)
