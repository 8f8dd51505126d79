"""What `export` refuses from a run's record alone, and what it says to do instead."""

import pytest

from tunelab.stages.export.exportable import ExportError, check_exportable


@pytest.mark.parametrize(
    ("record", "said"),
    [
        (
            {"id": "r002-probe", "kind": "baseline", "name": "probe", "status": "completed"},
            "not a bundle: train a variant that starts from its head (`tunelab run "
            "method.head_init=probe`) and export that.",
        ),
        (
            {"id": "r003-lora", "kind": "variant", "status": "interrupted", "checkpoint": "c"},
            "`tunelab resume r003-lora` finishes it; then export it.",
        ),
        (  # `resume` would refuse it: it had been told to resume it
            {"id": "r003-lora", "kind": "variant", "status": "interrupted"},
            "It kept no checkpoint to resume from: train it again (`tunelab run`, with "
            "training.checkpoint_every for a long run), then export that run.",
        ),
        (
            {"id": "r003-lora", "kind": "variant", "status": "invalid"},
            "Export a completed variant (`tunelab runs` lists them).",
        ),
    ],
)
def test_a_refusal_says_what_to_do_instead(tmp_path, record, said):
    if record.get("checkpoint"):  # a whole one: `resume` goes on from it
        (tmp_path / "checkpoint").mkdir()
        (tmp_path / "checkpoint" / "state.json").write_text("{}")
    with pytest.raises(ExportError) as refused:
        check_exportable(record, tmp_path)
    assert str(refused.value).endswith(said)
