"""Which spec the report shows: the newest comparison's reference, else the newest valid run,
else today's; each with a note saying which."""

from tunelab.stages.report.recorded_spec import recorded_spec

TODAY = {"compass": {"kind": "production", "why": "today"}}


def run(run_id: str, why: str, status: str = "completed", **spec) -> dict:
    return {
        "id": run_id,
        "status": status,
        "spec": {"compass": {"kind": "research", "why": why}} | spec,
    }


def test_the_newest_comparisons_reference_is_shown():
    records = [run("r001-base", "base"), run("r002-lora", "lora"), run("r003-new", "new")]
    comparisons = [
        {"id": "c001", "reference": "r002-lora", "rules": {"from": "r002-lora"}},
        {"id": "c002", "reference": "r001-base", "rules": {"from": "r001-base"}},
    ]
    shown = recorded_spec(records, comparisons, TODAY)
    assert shown["spec"]["compass"]["why"] == "base"
    assert shown["note"].startswith("As recorded with run `r001-base`, the reference of")
    assert "comparison `c002`" in shown["note"]


def test_without_a_comparison_the_newest_valid_run_is_shown():
    records = [run("r001-base", "base"), run("r002-leak", "leak", "invalid")]
    for comparisons in ([], [{"id": "c001", "reference": "r009-gone"}]):
        shown = recorded_spec(records, comparisons, TODAY)
        assert shown["spec"]["compass"]["why"] == "base"
        assert "`r001-base`, the newest run" in shown["note"]
    only_invalid = recorded_spec([run("r002-leak", "leak", "invalid")], [], TODAY)
    assert only_invalid["spec"]["compass"]["why"] == "leak"


def test_without_a_run_todays_spec_is_shown_and_said_so():
    shown = recorded_spec([{"id": "r001-old", "status": "failed"}], [], TODAY)
    assert shown == {
        "spec": TODAY,
        "note": "From the current `tunelab.yaml`: no run has recorded a spec yet.",
    }


def test_a_spec_recorded_without_a_compass_shows_the_default_one():
    record = {"id": "r001-old", "status": "completed", "spec": {"task": {"type": "x"}}}
    spec = recorded_spec([record], [], TODAY)["spec"]
    assert spec["compass"] == {"kind": "production", "why": ""} and spec["task"] == {"type": "x"}
