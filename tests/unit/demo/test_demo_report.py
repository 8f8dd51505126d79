"""A demo's report: the question it opens with, and how long it took in all and by section."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from tunelab.core.errors import TunelabError
from tunelab.core.lab import open_lab
from tunelab.data import build_data
from tunelab.demo import report as report_module
from tunelab.demo import run_demo
from tunelab.demo.report import DemoReport, broken_runs, cut_note, section_times


def test_each_section_runs_until_the_next_begins_and_the_set_up_comes_first():
    times = section_times(10.0, [("The data", 12.5), ("The preflight", 20.0)], 95.25)
    assert times == [
        {"n": 0, "title": "set-up", "seconds": 2.5},
        {"n": 1, "title": "The data", "seconds": 7.5},
        {"n": 2, "title": "The preflight", "seconds": 75.2},
    ]
    assert section_times(3.0, [], 4.0) == [{"n": 0, "title": "set-up", "seconds": 1.0}]


def test_the_ending_prints_and_returns_the_times_by_section(monkeypatch):
    clock = iter([100.0, 159.6, 400.0])  # two sections begin, then the demo ends
    monkeypatch.setattr(report_module.time, "perf_counter", lambda: next(clock))
    out = Console(record=True, width=200)
    report = DemoReport(out, None, SimpleNamespace(path=Path("lab")), started=90.0)
    report.section("The data")
    report.section("The handover")
    result = report.finish("runs")
    text = out.export_text()
    assert "1. The data" in text and "2. The handover" in text
    # section 0 is the set-up, and the times say their unit (it read "by section: 0 0:10")
    assert "done in 5.2 min (m:ss by section: set-up 0:10, 1 1:00, 2 4:00)." in text
    assert "Explore it: `tunelab runs --lab lab`." in text
    assert result["seconds"] == 310.0
    assert [s["seconds"] for s in result["sections"]] == [10.0, 59.6, 240.4]


def test_the_commands_it_suggests_can_be_pasted_into_a_shell(tmp_path):
    """A lab or a store whose path has a space is quoted in the command shown."""
    from tunelab.stages.track.track import ui_command
    from tunelab.stages.track.uri import Target
    from tunelab.views.data import init

    out = Console(record=True, width=300)
    DemoReport(out, None, SimpleNamespace(path=Path("my lab")), started=0.0).finish("runs")
    assert "`tunelab runs --lab 'my lab'`" in out.export_text()
    out = Console(record=True, width=300)
    init({"spec": "my lab/tunelab.yaml", "task": "format"}, out)
    init({"spec": "tunelab.yaml", "task": "format"}, out)
    said = out.export_text()
    assert "then run `tunelab data --lab 'my lab'`." in said
    assert "tunelab.yaml (format); edit it, then run `tunelab data`." in said
    uri = f"sqlite:///{tmp_path}/my lab/mlflow.db"
    assert (
        ui_command(Target(uri, "sqlite", None, "the default"))
        == f"mlflow ui --backend-store-uri '{uri}'"
    )


def test_the_question_gives_its_limits_in_the_tables_units():
    """It read 'minimum effect 0.01; f1 (every class) may drop at most 0.03' above tables in
    points."""
    from tunelab.core.spec import Guardrail
    from tunelab.demo.report import _rail_text

    assert _rail_text(Guardrail(metric="f1", scope="every_class", max_drop=0.03)) == (
        "f1 (every class) may drop at most 3.0 points"
    )
    assert (
        _rail_text(Guardrail(metric="json_valid", max_drop=0.0))
        == "json valid (overall) may not drop"
    )
    news = Guardrail(metric="bits_per_byte", on="general/news.jsonl", max_drop=0.05)
    assert _rail_text(news) == "bits per byte on general/news.jsonl may rise at most 0.05"


def test_a_variant_whose_training_broke_is_named_after_the_verdict():
    """The image demo's full fine-tune lost its probe's start (first loss 14.9) and read as
    "worse on one seed", as if full fine-tuning were 54 points worse than LoRA."""

    class Records:
        def runs(self):
            lost = {"first": 14.9121, "probe": 0.0021, "prior": 1.79, "message": "m"}
            return [{"id": "r003-lora"}, {"id": "r004-type-full", "training": {"start_lost": lost}}]

    result = {
        "runs": [
            {"id": "r003-lora", "kind": "variant", "vs_reference": {}, "verdict": "x"},
            {
                "id": "r004-type-full",
                "kind": "variant",
                "vs_reference": {"d": 1},
                "verdict": "worse",
            },
            {"id": "r002-probe", "kind": "baseline", "vs_reference": None},
        ]
    }
    (said,) = broken_runs(Records(), result)
    assert said.startswith("Read r004-type-full's verdict (worse) with care: its first training")
    assert "14.9121 against its probe's 0.0021" in said and "the run broke" in said


def test_an_unknown_demo_names_the_known_ones_in_words():
    """It printed a Python list: known: ['classification', 'extraction', ...]."""
    with pytest.raises(TunelabError, match=r"known: classification, extraction, ablation"):
        run_demo("bogus", Path("."), Console())


def test_the_demo_says_early_when_the_model_reads_only_the_texts_beginnings(make_lab):
    """Every validation article was cut to 128 tokens, first said at the handover."""
    path = make_lab()
    lab = open_lab(path, {"model.max_length": 8})
    build_data(lab.spec, lab.path, lab.store)
    said = cut_note(lab)
    n = len(lab.store.read_split(lab.data_version, "validation"))
    assert said.startswith("The model reads at most 8 tokens of a text (model.max_length): ")
    assert f"of {n} validation texts are longer" in said
    assert cut_note(open_lab(path, {"model.max_length": 64})) is None  # none cut: nothing said


def test_a_bad_override_is_named_as_the_command_line_s(tmp_path):
    """It was blamed on "line 57" of the spec the demo had written (hU F8), which it left
    invalid in the lab folder."""
    from tunelab.core.spec import SPEC_FILE, SpecError

    lab = tmp_path / "demo"
    with pytest.raises(SpecError, match=r"nope.x=1 \(command line\)"):
        run_demo("classification", lab, Console(quiet=True), quiet=True, overrides={"nope.x": 1})
    assert open_lab(lab).spec.task.type == "classification"  # the demo's own spec, valid
    assert "nope" not in (lab / SPEC_FILE).read_text()


def test_a_folder_of_empty_caches_is_no_earlier_lab_to_set_aside(tmp_path):
    """Torch makes the compile cache the CLI points into the lab on import: every first demo
    said "the previous demo lab was moved" and left an empty one beside it (hX F2)."""
    from tunelab.demo.assets import set_aside

    lab = tmp_path / "classification"
    (lab / ".tunelab" / "cache" / "torchinductor").mkdir(parents=True)
    assert set_aside(lab) is None and lab.is_dir()
    (lab / "tunelab.yaml").write_text("x: 1\n")  # a lab: renamed with its time, never deleted
    moved = set_aside(lab)
    assert moved is not None and (moved / "tunelab.yaml").is_file() and not lab.exists()
