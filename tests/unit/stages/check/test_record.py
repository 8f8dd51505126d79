"""The check's record: its key (the spec's wiring) and what `run` says about it. No model loads:
a check record is written by hand where a test needs one."""

from __future__ import annotations

import pytest

from tunelab.core.lab import open_lab
from tunelab.core.spec import TrainingSpec, parse_overrides
from tunelab.core.store import atomic_write_json, now
from tunelab.stages.check.record import (
    QUALITY_ONLY,
    SET_OR_NOT,
    check_path,
    check_status,
    platform_of,
    wiring,
    wiring_hash,
)

VERSION = "v1"


def lab_at(path, *overrides: str):
    return open_lab(path, parse_overrides(list(overrides)))


def write_check(lab, passed: bool = True, keep_wiring: bool = True) -> dict:
    """A check record as `run_check` writes it, for `lab`'s spec on VERSION."""
    path = check_path(lab.store, lab.spec, VERSION)
    record = {
        "passed": passed,
        "failed": [] if passed else ["targets"],
        "data_version": VERSION,
        "spec_hash": wiring_hash(lab.spec),
        "file": str(path.relative_to(lab.store.lab)),
        "platform": platform_of(lab.device),
        "created": now(),
    }
    if keep_wiring:
        record["wiring"] = wiring(lab.spec)
    atomic_write_json(path, record)
    return record


def test_every_training_field_is_in_the_key_or_listed_as_quality_only(make_lab):
    """A field added to the training section later is in the key unless someone lists it here,
    and a list entry cannot outlive its field."""
    fields = set(TrainingSpec.model_fields)
    assert set(QUALITY_ONLY) <= fields and set(SET_OR_NOT) <= fields
    assert not set(QUALITY_ONLY) & set(SET_OR_NOT)
    keyed = set(wiring(lab_at(make_lab()).spec)["training"])
    assert keyed == fields - set(QUALITY_ONLY)
    assert all(why.strip() for why in (*QUALITY_ONLY.values(), *SET_OR_NOT.values()))


@pytest.mark.parametrize(
    "change",
    [
        "training.compile=true",
        "training.activation_checkpointing=true",
        "training.strategy=fsdp",
        "training.threads=2",
        "training.precision=bf16",
        "training.group_by_length=true",
        "training.microbatch=2",
        "training.global_batch=32",
        "training.max_grad_norm=null",  # clipping off
        "training.checkpoint_every=5",  # checkpoints on
        "method.r=2",
        "model.dtype=bfloat16",
        "model.attention=eager",
    ],
)
def test_a_switch_that_changes_the_code_changes_the_key(make_lab, change):
    path = make_lab()
    assert wiring_hash(lab_at(path, change).spec) != wiring_hash(lab_at(path).spec)


def test_packing_changes_the_key(make_extraction_lab):
    path = make_extraction_lab()  # packing needs a causal LM
    assert wiring_hash(lab_at(path, "training.packing=true").spec) != wiring_hash(lab_at(path).spec)


def test_quality_only_fields_leave_the_key_alone(make_lab):
    path = make_lab()
    same = wiring_hash(lab_at(path, "training.checkpoint_every=5").spec)
    changed = [
        "training.lr=1e-3",
        "training.weight_decay=0.1",
        "training.schedule=cosine",
        "training.warmup_steps=3",
        "training.decay_fraction=0.5",
        "training.budget.steps=9",
        "training.seed=3",
        "training.replicates=3",
        "training.max_grad_norm=0.5",  # still clipping
        "training.checkpoint_every=50",  # still checkpointing
        "evaluation.batch_size=4",
        "hypothesis.min_effect=0.5",
        "compass.why=another sentence",
    ]
    assert wiring_hash(lab_at(path, *changed).spec) == same


def test_a_check_without_packing_warns_a_packed_run_and_names_the_switch(make_extraction_lab):
    path = make_extraction_lab()
    checked = write_check(lab_at(path))
    packed = check_status(lab_at(path, "training.packing=true"), VERSION)
    assert packed["passed"] is None and packed["file"] is None
    warning = packed["warning"]
    assert warning.startswith("no `tunelab check` has run for this spec and data version")
    assert checked["file"] in warning and "training.packing false, now true" in warning
    assert "Run it again" in warning
    # an lr change is quality, not wiring: the same check covers it, silently
    other_lr = check_status(lab_at(path, "training.lr=1e-3"), VERSION)
    assert other_lr == {"file": checked["file"], "passed": True, "warning": None}
    # a strategy: check runs one process, the same code either way, so its check covers it
    # (it asked for a check run again, which would check what it had)
    fsdp = check_status(lab_at(path, "training.strategy=fsdp"), VERSION)
    assert fsdp == {"file": checked["file"], "passed": True, "warning": None}
    both = check_status(lab_at(path, "training.strategy=fsdp", "training.packing=true"), VERSION)
    assert "training.packing false, now true" in both["warning"]


def test_the_warning_lists_a_few_changes_and_counts_the_rest(make_lab):
    path = make_lab()
    write_check(lab_at(path))
    switches = [
        "training.compile=true",
        "training.group_by_length=true",
        "training.threads=2",
        "training.strategy=fsdp",
        "training.max_grad_norm=null",
        "model.attention=eager",
    ]
    warning = check_status(lab_at(path, *switches), VERSION)["warning"]
    # in the order of their names: the first four, then a count
    assert 'model.attention "auto", now "eager"; training.compile false, now true' in warning
    assert 'training.max_grad_norm "set", now "not set"; and 2 more.' in warning
    assert "training.threads" not in warning


def test_the_warning_names_the_closest_check_not_the_newest(make_lab):
    """It named the newest: after a what-if check of three switches, a run one switch from the
    spec's own check was told of the what-if's three."""
    path = make_lab()
    own = write_check(lab_at(path))
    what_if = lab_at(path, "training.group_by_length=true", "model.attention=eager")
    newer = write_check(what_if) | {"created": "9999-01-01T00:00:00Z"}
    atomic_write_json(check_path(what_if.store, what_if.spec, VERSION), newer)
    warning = check_status(lab_at(path, "training.compile=true"), VERSION)["warning"]
    assert f"the closest one on it ({own['file']}) checked other wiring: " in warning
    assert "training.compile false, now true. Run it again" in warning


def test_a_check_recorded_before_wiring_was_kept_still_warns_in_words(make_lab):
    """It said the old check had covered "another task, model, method or training switch", of
    an unchanged spec: the record does not say what it checked."""
    path = make_lab()
    write_check(lab_at(path), keep_wiring=False)
    warning = check_status(lab_at(path, "training.compile=true"), VERSION)["warning"]
    assert "was written by an earlier tunelab that did not record what it checked" in warning
    assert "another task" not in warning and "Run it again" in warning


def test_run_status_without_a_check_after_a_failed_one_or_from_another_platform(make_lab):
    path = make_lab()
    lab = lab_at(path)
    assert check_status(lab, VERSION)["warning"] == (
        "no `tunelab check` has run for this spec and data version: run it first (minutes, on "
        "a slice) to catch wiring errors before a long run"
    )
    write_check(lab, passed=False)
    assert "FAILED (targets)" in check_status(lab, VERSION)["warning"]
    record = write_check(lab) | {"platform": {"device": "cuda"}}
    atomic_write_json(check_path(lab.store, lab.spec, VERSION), record)
    assert "another platform" in check_status(lab, VERSION)["warning"]


def test_a_damaged_check_record_warns_the_run_to_check_again(make_lab):
    """A check record cut short (a full disk, a hand edit) made `tunelab run` an internal
    error (JSONDecodeError): a check is redone in minutes, so `run` says so, as for none."""
    lab = lab_at(make_lab())
    write_check(lab)
    path = check_path(lab.store, lab.spec, VERSION)
    path.write_text(path.read_text()[:40])
    status = check_status(lab, VERSION)
    assert status["passed"] is None and str(path.relative_to(lab.store.lab)) in status["warning"]
    assert "not readable JSON" in status["warning"]
    assert status["warning"].endswith("run `tunelab check` again")
    # another spec's damaged record is passed over when naming what the newest check covered
    other = lab_at(lab.store.lab, "training.compile=true")
    assert "no `tunelab check` has run" in check_status(other, VERSION)["warning"]


def test_the_lr_a_check_ran_at_is_weighed_against_the_run_s(make_lab):
    """The key leaves the lr out, yet the update and loss items answer for it: a what-if check
    at lr 1e-30 failed them and replaced the spec's passing check, and the run at the spec's
    own lr was told its check FAILED; a run at 1e-30 after a passing check was told nothing."""
    path = make_lab()
    lab = lab_at(path)
    record = write_check(lab) | {"training": {"lr": 1e-30}, "passed": False}
    atomic_write_json(check_path(lab.store, lab.spec, VERSION), record | {"failed": ["update"]})
    warning = check_status(lab, VERSION)["warning"]
    assert (
        f"FAILED (update) at training.lr 1e-30, and this run trains at {lab.spec.training.lr:g}"
        in (warning)
    )
    assert warning.endswith("run `tunelab check` at this lr")
    atomic_write_json(
        check_path(lab.store, lab.spec, VERSION), record | {"failed": ["update", "reload"]}
    )  # a failure that is not the lr's is said as it is
    assert check_status(lab, VERSION)["warning"].endswith("FAILED (update, reload)")

    passed = write_check(lab) | {"training": {"lr": 1e-3}}
    atomic_write_json(check_path(lab.store, lab.spec, VERSION), passed)
    assert check_status(lab_at(path, "training.lr=1e-4"), VERSION)["warning"] is None
    tiny = check_status(lab_at(path, "training.lr=1e-30"), VERSION)
    assert (
        tiny["passed"]
        and "passed at training.lr 0.001, and this run's lr 1e-30 is" in (tiny["warning"])
    )
    assert tiny["warning"].endswith("run `tunelab check training.lr=1e-30`")


def test_a_what_if_check_that_failed_on_the_lr_goes_beside_the_spec_s_passing_one(make_lab):
    """`tunelab check training.lr=1e-30` failed update and loss and replaced the passing record
    of the spec's own lr: the run at that lr was then told to check again."""
    from tunelab.stages.check.steps import _beside_a_pass

    path = make_lab()
    lab = lab_at(path)
    passed = write_check(lab) | {"training": {"lr": lab.spec.training.lr}}
    atomic_write_json(check_path(lab.store, lab.spec, VERSION), passed)
    what_if = lab_at(path, "training.lr=1e-30")
    main = check_path(what_if.store, what_if.spec, VERSION)
    beside = _beside_a_pass(what_if.store, what_if.spec, VERSION, main, ["update", "loss"])
    assert beside != main and beside.name == f"{main.stem}-lr1e-30.json"
    assert _beside_a_pass(what_if.store, what_if.spec, VERSION, main, ["reload"]) == main
    assert _beside_a_pass(lab.store, lab.spec, VERSION, main, ["update"]) == main  # its own lr
    assert check_status(lab, VERSION)["warning"] is None  # the spec's pass still stands
