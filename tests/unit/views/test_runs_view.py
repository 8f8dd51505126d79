"""The run view's words for a variant trained from its baseline's own spec: what that baseline
measured, by its kind."""

from __future__ import annotations

from tunelab.views.runs import _after_baseline


def test_a_variant_of_a_baseline_says_what_that_baseline_measured():
    """A from-scratch run read 'now fine-tuned (the baseline measured the base as it is)', and
    a LoRA on an image probe the same."""
    scratch = {"spec": {"model": {"init": "scratch"}}, "parent_method": "zero-shot"}
    assert _after_baseline(scratch) == (
        "the same spec, now trained (the baseline measured the untrained model)"
    )
    probe = {"spec": {"model": {"init": "pretrained"}}, "parent_method": "probe"}
    assert "(the baseline measured a linear probe on the base's frozen features)" in (
        _after_baseline(probe)
    )
    zero = {"spec": {"model": {}}, "parent_method": "zero-shot"}
    assert _after_baseline(zero).endswith("measured the base as it is, zero-shot)")
    assert _after_baseline({}).endswith("now fine-tuned (the baseline measured the base model)")


def test_a_run_the_log_does_not_vouch_for_is_marked():
    """An edited record's 99% read as the run's own, with no mark."""
    import io

    from rich.console import Console

    from tunelab.views.runs import runs

    row = {
        "id": "r003-lora",
        "kind": "variant",
        "status": "completed",
        "data_version": "6e220d6cae79",
        "seed": 0,
        "metric": "macro_f1",
        "value": 0.99,
        "created": "2026-12-06T10:00:00",
        "doubt": "edited after the log wrote it",
    }
    out = io.StringIO()
    runs([row], Console(file=out, width=300))
    text = out.getvalue()
    assert "completed (record not vouched for)" in text
    assert "not vouched for by the event log: r003-lora (edited after the log wrote it)" in text


def test_each_run_of_a_replicate_group_shows_its_group():
    """README: `tunelab runs` shows each run's seed and its group; the table had the seed only,
    and the footer counted the group's seeds without naming them."""
    import io

    from rich.console import Console

    from tunelab.views.runs import runs

    row = {"kind": "variant", "status": "completed", "data_version": "6e220d6cae79"}
    row |= {"metric": "bits_per_byte", "value": 3.4, "created": "2026-12-06T10:00:00"}
    rows = [
        row | {"id": "r004-rep", "seed": 0, "group": "g001"},
        row | {"id": "r005-rep-s1", "seed": 625451353, "group": "g001"},
        row | {"id": "r006-alone", "seed": 0},
    ]
    out = io.StringIO()
    runs(rows, Console(file=out, width=300))
    text = out.getvalue()
    assert "│ 0 (g001) " in text and "│ 625451353 (g001) " in text and "│ 0    " in text
    assert "replicate group g001: 2 of 2 planned seeds (2 completed): r004-rep, r005-rep-s1\n" in (
        text
    )
    # an interrupted seed ended its group early: how many were planned, and how to go on
    rows = [
        row | {"id": "r007-long", "seed": 0, "group": "g002", "group_seeds": 3},
        row
        | {"id": "r008-long-s1", "seed": 7, "group": "g002", "group_seeds": 3}
        | {"status": "interrupted"},
    ]
    out = io.StringIO()
    runs(rows, Console(file=out, width=300))
    said = " ".join(out.getvalue().split())
    assert "replicate group g002: 2 of 3 planned seeds (1 completed, 1 interrupted)" in said
    assert "the same `tunelab run --seeds N` trains the seeds it lacks" in said
    # a noise floor stopped and run again: two groups that each count both seeds, listed as
    # their records list them (each had read "1 of 2 planned seeds", advising `run --seeds`)
    floor = {"group_seeds": 2, "group_runs": ["r003-lora", "r004-lora-s1"]}
    floor["group_again"] = "`tunelab noise r003-lora --seeds 2`"
    rows = [
        row | floor | {"id": "r003-lora", "seed": 0, "group": "g004"},
        row | floor | {"id": "r004-lora-s1", "seed": 7, "group": "g003"},
    ]
    out = io.StringIO()
    runs(rows, Console(file=out, width=300))
    said = " ".join(out.getvalue().split())
    for group in ("g003", "g004"):
        assert f"replicate group {group}: 2 of 2 planned seeds (2 completed)" in said
    rows[1]["status"] = "interrupted"
    out = io.StringIO()
    runs(rows, Console(file=out, width=300))
    said = " ".join(out.getvalue().split())
    assert "`tunelab noise r003-lora --seeds 2` trains the seeds it lacks" in said
    # the same noise floor run again after that stop went on in a group of its own
    rows[0]["group_again"] = rows[1]["group_again"] = "continued by g005"
    out = io.StringIO()
    runs(rows, Console(file=out, width=300))
    said = " ".join(out.getvalue().split())
    assert "(1 completed, 1 interrupted): r003-lora, r004-lora-s1; continued by g005" in said
    assert "trains the seeds it lacks" not in said
