"""The event log as a hash chain: edits, deletions, reorderings and insertions are named by
line; a log from before the chain is read as it is; concurrent writers stay in one chain."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from tunelab.core.chain import GENESIS, verify
from tunelab.core.store import Store, StoreError


def logged(tmp_path: Path, n: int = 5) -> Store:
    store = Store(tmp_path)
    for i in range(n):
        store.log_event("step", i=i)
    return store


def lines(store: Store) -> list[str]:
    return store.log_path.read_text().splitlines()


def rewrite(store: Store, new: list[str]) -> None:
    store.log_path.write_text("\n".join(new) + "\n")


def test_a_fresh_log_is_one_chain_from_genesis(tmp_path):
    store = logged(tmp_path)
    state = verify(store.log_path)
    assert state["problems"] == [] and state["lines"] == 5 and state["unchained"] == 0
    assert json.loads(lines(store)[0])["prev"] == GENESIS
    assert store.require_intact_log("compare")["head"] == state["head"]


def test_an_edited_line_is_named_by_the_line_after_it(tmp_path):
    store = logged(tmp_path)
    old = lines(store)
    old[1] = old[1].replace('"i": 1', '"i": 9')
    rewrite(store, old)
    (problem,) = verify(store.log_path)["problems"]
    assert problem["line"] == 3 and "does not follow line 2" in problem["problem"]
    with pytest.raises(StoreError, match="line 3 does not follow line 2"):
        store.require_intact_log("compare")


def test_a_deleted_and_a_reordered_line_are_detected(tmp_path):
    store = logged(tmp_path)
    old = lines(store)
    rewrite(store, old[:2] + old[3:])
    assert [p["line"] for p in verify(store.log_path)["problems"]] == [3]
    rewrite(store, [old[0], old[2], old[1], *old[3:]])
    assert [p["line"] for p in verify(store.log_path)["problems"]] == [2, 3, 4]


def test_an_inserted_line_without_a_link_is_detected(tmp_path):
    store = logged(tmp_path, 3)
    old = lines(store)
    rewrite(store, [old[0], '{"event": "final", "run": "r009"}', *old[1:]])
    problems = verify(store.log_path)["problems"]
    assert {p["line"] for p in problems} == {2, 3}
    assert problems[0]["problem"] == "has no link to the line before it (inserted?)"


def test_an_unlinked_tunelab_event_names_an_older_tunelab_as_a_cause(tmp_path):
    """A tunelab from before store format 2 cannot read format.json to refuse the lab: its
    events, appended without links, read as lines "inserted?" and the lab as tampered."""
    store = logged(tmp_path, 3)
    store.log_path.open("a").write('{"event": "run_started", "time": "2026-12-02T00:00:00"}\n')
    (problem,) = verify(store.log_path)["problems"]
    assert problem["line"] == 4
    assert (
        "as a tunelab older than store format 2 writes (open this lab with a newer one)"
        in (problem["problem"])
    )


def test_a_log_from_before_the_chain_is_read_and_the_chain_starts_after_it(tmp_path):
    store = Store(tmp_path)
    store.log_path.parent.mkdir(parents=True)
    store.log_path.write_text('{"event": "data"}\n{"event": "run_started"}\n')
    store.log_event("compare")
    state = verify(store.log_path)
    assert state["unchained"] == 2 and state["problems"] == []


def test_a_marked_break_forgives_the_lines_it_names_and_no_others(tmp_path):
    store = logged(tmp_path)
    old = lines(store)
    old[1] = old[1].replace('"i": 1', '"i": 9')
    rewrite(store, old)
    store.log_event("chain_break", reason="restored by hand", forgives=[3])
    assert verify(store.log_path)["problems"] == []
    store.log_event("step", i=6)
    assert verify(store.log_path)["problems"] == []
    store.log_event("step", i=7)
    after = lines(store)
    after[-2] = after[-2].replace('"i": 6', '"i": 8')  # an edit after the break: not forgiven
    rewrite(store, after)
    assert [p["line"] for p in verify(store.log_path)["problems"]] == [len(after)]


def test_the_first_line_deleted_is_named_as_the_chain_s_start(tmp_path):
    store = logged(tmp_path)
    rewrite(store, lines(store)[1:])
    (problem,) = verify(store.log_path)["problems"]
    assert problem["line"] == 1 and "the first line was deleted or edited" in problem["problem"]


def _append(args) -> None:
    lab, worker = args
    store = Store(Path(lab))
    for i in range(20):
        store.log_event("step", worker=worker, i=i)


def test_writers_in_several_processes_keep_one_whole_chain(tmp_path):
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.map(_append, [(str(tmp_path), w) for w in range(4)])
    state = verify(Store(tmp_path).log_path)
    assert state["lines"] == 80 and state["problems"] == []


def test_a_lab_begun_chained_has_no_old_lines_to_strip_its_links_into(tmp_path):
    """Deleting `prev` from every line (one `sed`) had read as a log from before the chain:
    a deleted line and an edited one then passed. The store's format says where the chain
    begins: line 1 in a lab begun in format 2, `since_line` in one upgraded."""
    store = logged(tmp_path)
    stripped = [
        json.dumps({k: v for k, v in json.loads(x).items() if k != "prev"}) for x in lines(store)
    ]
    rewrite(store, stripped[:2] + stripped[3:])  # and line 3 deleted
    assert verify(store.log_path)["problems"] == []  # a log the format does not speak for
    found = verify(store.log_path, chained_from=1)
    assert [p["line"] for p in found["problems"]] == [1, 2, 3, 4] and found["unchained"] == 0
    assert "has no link to the line before it" in found["problems"][0]["problem"]
    upgraded = verify(store.log_path, chained_from=3)  # two lines from format 1, then chained
    assert [p["line"] for p in upgraded["problems"]] == [3, 4] and upgraded["unchained"] == 2
    assert Store(tmp_path).audit()["problems"]  # the lab's own format.json: begun chained


def test_a_format_record_that_moves_the_chain_s_start_past_format_2_lines_is_named(tmp_path):
    """One key, `since_line: 1000`, had turned the stripped log back into old lines (hW N2):
    a line that holds a record's sha256 was written by format 2, so the claim is false."""
    store = logged(tmp_path)
    events = [{k: v for k, v in json.loads(x).items() if k != "prev"} for x in lines(store)]
    events[1]["record_sha256"] = "0" * 64  # as `Store.save` writes it
    rewrite(store, [json.dumps(e) for e in events])
    assert verify(store.log_path, chained_from=None)["problems"] == []  # a format-1 log
    found = verify(store.log_path, chained_from=1000)
    assert [p["line"] for p in found["problems"]] == [2]
    assert "format.json was edited" in found["problems"][0]["problem"]
