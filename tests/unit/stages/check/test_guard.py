"""A check step that raises fails its items: the wiring's error is a finding, and one raised in
tunelab's own code says it is a bug of tunelab's."""

import torch

from tunelab.stages.check.record import wiring_changes
from tunelab.stages.check.steps import _guard


def test_an_error_in_tunelab_s_code_is_said_to_be_a_bug_not_the_wiring():
    (bug, skipped) = _guard(("reload", "next"), lambda ctx: wiring_changes({"a": 1}, None), {})
    assert not bug["passed"] and bug["internal"] and skipped["skipped"]
    assert "raised in tunelab's own code, tunelab/stages/check/record.py:" in bug["detail"]
    assert "a bug of tunelab's, not the wiring" in bug["detail"]
    (wiring,) = _guard(("update",), lambda ctx: torch.zeros(2) @ torch.zeros(3), {})
    assert not wiring["passed"] and not wiring["internal"]
    assert wiring["detail"].startswith("RuntimeError: ") and "tunelab's own" not in wiring["detail"]
