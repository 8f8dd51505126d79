"""The lines `tunelab run` prints as a variant starts."""

from __future__ import annotations

from tunelab.stages.run.lines import _left_out, processes_text


def test_the_start_line_says_how_many_train_rows_were_left_out_and_why():
    assert _left_out([]) == ""
    rejected = [{"id": f"c{i}", "kind": "unknown_role"} for i in range(28)]
    rejected.append({"id": "long", "kind": "target_truncated"})
    assert _left_out(rejected) == (
        " (29 train rows left out, 28 unknown_role, 1 target_truncated: `tunelab inspect` says why)"
    )


def test_one_process_says_it_did_not_shard_as_the_spec_asked():
    assert processes_text(1, "ddp") == "1 process"
    assert "unsharded here" in processes_text(1, "fsdp")
    assert processes_text(2, "fsdp") == "2 processes (fsdp)"
