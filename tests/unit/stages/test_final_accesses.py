"""The access log of the sealed test split: read strictly, one opening at a time, and each
result with its own opening."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from final_labs import FOR_REPORT, cli, lab_with_baselines  # noqa: F401 (pytest finds the fixture here)

from tunelab.core.lab import open_lab
from tunelab.core.seal import SealBrokenError, final_accesses
from tunelab.core.store import Store, StoreError
from tunelab.stages.final.sealed import FinalError, run_final
from tunelab.stages.fsck import fsck


def test_a_damaged_event_log_stops_final_naming_the_line(lab_with_baselines):
    lab = open_lab(lab_with_baselines[0])
    run_final(lab, "r001-majority", FOR_REPORT)
    log = lab.store.root / "events.jsonl"
    lines = log.read_text().splitlines()
    lines[1] = lines[1][: len(lines[1]) // 2]  # an earlier line cut in half
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(StoreError, match=r"line 2 not a JSON event \(damaged or edited\)"):
        run_final(lab, "r001-majority", "a second look")
    assert len(lab.store.events()) == len(lines) - 1  # other readers still skip the line
    fsck(lab.path, repair=True, reason="the cut line is known")  # the chain forgives it...
    with pytest.raises(StoreError, match=rf"{log}:2: the event log is damaged"):
        run_final(lab, "r001-majority", "a second look")  # ...the access log does not


def test_a_final_result_missing_from_the_log_is_refused(lab_with_baselines):
    lab = open_lab(lab_with_baselines[0])
    first = run_final(lab, "r001-majority", FOR_REPORT)
    log = lab.store.root / "events.jsonl"
    kept = [line for line in log.read_text().splitlines() if '"event": "final' not in line]
    log.write_text("\n".join(kept) + "\n")  # the opening erased from the log
    # the last line deleted: no later line links to it, so the chain cannot see it; the finals
    # record is in no event now (`core.unlogged`), and anchors it too
    with pytest.raises(StoreError, match=rf"{first['file']} in no event of the log"):
        run_final(lab, "r001-majority", None)
    from tunelab.core.seal import final_accesses

    with pytest.raises(SealBrokenError, match=rf"{first['file']} records an opening"):
        final_accesses(lab.store)  # what `final` reads next, were the log accepted


def _final_in_a_process(lab: str, queue) -> None:
    try:
        queue.put(run_final(open_lab(Path(lab)), "r001-majority", None)["n"])
    except FinalError as err:
        queue.put(str(err))


def test_two_finals_at_once_open_the_seal_once_without_a_reason(lab_with_baselines, monkeypatch):
    """The second of two finals started together sees the first's opening and asks for a
    reason, as it would one after the other."""
    import contextlib
    import threading

    from tunelab.stages.final import sealed as final

    monkeypatch.setattr(final, "_check_verdict", lambda *_: None)  # a baseline, as if chosen
    ctx = multiprocessing.get_context("fork")
    meet, read = ctx.Barrier(2), final.final_accesses

    def racing(store):  # both read the access log before either writes, unless one must wait
        found = read(store)
        with contextlib.suppress(threading.BrokenBarrierError):
            meet.wait(timeout=3)
        return found

    monkeypatch.setattr(final, "final_accesses", racing)
    queue = ctx.Queue()
    procs = [ctx.Process(target=_final_in_a_process, args=(str(lab_with_baselines[0]), queue))]
    procs.append(ctx.Process(target=_final_in_a_process, args=(str(lab_with_baselines[0]), queue)))
    for p in procs:
        p.start()
    outcomes = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sorted(outcomes, key=str)[0] == 1  # one opened it, as access 1
    assert "already opened" in next(o for o in outcomes if isinstance(o, str))
    assert [a["n"] for a in final_accesses(Store(lab_with_baselines[0]))] == [1]


def test_a_result_keeps_its_own_openings_time(lab_with_baselines, monkeypatch):
    """Two finals at once: the first's result took the time of the second's opening, logged
    while the first evaluated."""
    from tunelab.stages.final import sealed as final

    lab = open_lab(lab_with_baselines[0])
    scorer = final.scorer_of

    def meanwhile(*args):  # another final opens the split while this one evaluates
        scores = scorer(*args)

        def scored(rows):
            lab.store.log_event("final", n=2, run="r001-majority", time="2099-01-01T00:00:00+00:00")
            return scores(rows)

        return scored

    monkeypatch.setattr(final, "scorer_of", meanwhile)
    result = run_final(lab, "r001-majority", FOR_REPORT)
    first = next(a for a in final_accesses(lab.store) if a["n"] == 1)
    assert result["time"] == first["time"] != "2099-01-01T00:00:00+00:00"


def test_a_stop_as_the_opening_is_logged_still_says_the_split_was_opened(
    lab_with_baselines, monkeypatch
):
    """A Ctrl-C landing just after the `final` line was written (as the log's held signal is
    let go) got the generic message, and no `final_interrupted` line."""
    from tunelab.core.errors import Interrupted

    lab = open_lab(lab_with_baselines[0])
    log_event = lab.store.log_event

    def stopped_after(event, **fields):
        log_event(event, **fields)
        if event == "final":
            raise KeyboardInterrupt

    monkeypatch.setattr(lab.store, "log_event", stopped_after)
    with pytest.raises(Interrupted, match=r"opened for r001-majority \(access 1, logged\)"):
        run_final(lab, "r001-majority", FOR_REPORT)
    assert [e["event"] for e in lab.store.events()][-2:] == ["final", "final_interrupted"]


def test_a_stop_after_the_scoring_says_the_look_is_spent_and_leaves_no_unnamed_predictions(
    lab_with_baselines, monkeypatch
):
    """A Ctrl-C in the interval's bootstrap (after the test rows were scored) got the generic
    message, and left the test predictions in finals/ with no record naming them."""
    from tunelab.core.errors import Interrupted
    from tunelab.stages.final import sealed as final

    lab = open_lab(lab_with_baselines[0])

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(final, "score_interval", stopped)
    with pytest.raises(Interrupted, match=r"opened for r001-majority \(access 1, logged\)"):
        run_final(lab, "r001-majority", FOR_REPORT)
    assert [e["event"] for e in lab.store.events()][-2:] == ["final", "final_interrupted"]
    assert list((lab.store.root / "finals").glob("*.predictions.jsonl")) == []
    monkeypatch.undo()
    again = run_final(lab, "r001-majority", FOR_REPORT)  # a second look: needs its reason
    assert again["n"] == 2 and again["repeated"]


def test_fsck_names_test_predictions_no_final_record_names(lab_with_baselines):
    """A final killed after scoring left its test predictions, and fsck read the lab clean."""
    lab = open_lab(lab_with_baselines[0])
    run_final(lab, "r001-majority", FOR_REPORT)
    assert fsck(lab.path)["passed"]
    killed = lab.store.root / "finals" / "2-r001-majority.predictions.jsonl"
    killed.write_text('{"id": "t0"}\n')
    (problem,) = fsck(lab.path)["problems"]
    assert problem["path"] == ".tunelab/finals/2-r001-majority.predictions.jsonl"
    assert problem["problem"].startswith("test predictions no final record names")
