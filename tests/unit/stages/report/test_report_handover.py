"""The report's handover lines: each bundle with the test score it carries (a bundle exported
before its run's final carries none, as its card says), and the base its last verify was given
where that is not the one the bundle is bound to."""

from __future__ import annotations

from tunelab.core.store import Store, atomic_write_json
from tunelab.stages.report import handover


def test_a_bundle_carries_the_finals_made_before_it_and_says_which_base_verified_it(tmp_path):
    store = Store(tmp_path)
    base = {"name": "tiny", "path": "/models/tiny", "weights_sha256": "ab" * 32}
    records = {
        "1-r005-lora.json": {"created": "2026-12-07T19:52:44+00:00", "verified": {"passed": True}},
        "2-r005-lora.json": {
            "created": "2026-12-07T19:53:14+00:00",
            "verified": {"passed": True, "base": "/copies/tiny"},
        },
    }
    for name, record in records.items():
        record |= {"run": "r005-lora", "bundle": str(tmp_path / name), "base_model": base}
        atomic_write_json(store.root / "exports" / name, record)
    final = {"run": "r005-lora", "time": "2026-12-07T19:52:58+00:00", "test": 0.58}
    before, after = handover.exports(store, [final, {"run": "r003-full", "time": "0"}])
    assert before["final"] is None and after["final"] == final
    assert before["verified_on"] is None and after["verified_on"] == "/copies/tiny"


def test_a_scratch_bundle_verified_on_another_base_says_so(tmp_path):
    """Its export records no base path (the bundle's own `base/` is its base)."""
    store = Store(tmp_path)
    bundle = tmp_path / "bundles" / "r002-mha"
    scratch = {"name": "scratch LlamaConfig", "path": None, "weights_sha256": "cd" * 32}
    for name, given in (("1-r002-mha.json", "/copies/base"), ("2-r002-mha.json", bundle / "base")):
        record = {"run": "r002-mha", "bundle": str(bundle), "base_model": scratch}
        record |= {"created": "2026-12-07T20:00:00+00:00"}
        atomic_write_json(
            store.root / "exports" / name,
            record | {"verified": {"passed": False, "base": str(given)}},
        )
    elsewhere, own = handover.exports(store, [])
    assert elsewhere["verified_on"] == "/copies/base" and own["verified_on"] is None
