"""How a trained model is written: an adapter (with its saved modules) or the full weights, as
safetensors, in bytes that do not depend on the process that wrote them."""

from __future__ import annotations

from pathlib import Path

import torch


def save_trained(model: torch.nn.Module, out: Path) -> list[str]:
    """Adapter (with saved modules) or full weights, always as safetensors."""
    model.save_pretrained(out, safe_serialization=True)
    _sorted_sets(model, out)
    return sorted(p.name for p in out.iterdir())


def _sorted_sets(model: torch.nn.Module, out: Path) -> None:
    """PEFT writes a set in its config (`target_modules`) as a list in the set's order, which
    Python's string hashing changes from process to process: two identical trainings wrote
    different `adapter_config.json` bytes, so different weight hashes. Sorted, they are one."""
    import json

    for name, config in (getattr(model, "peft_config", None) or {}).items():
        path = (out if name == "default" else out / name) / "adapter_config.json"
        sets = [k for k, v in vars(config).items() if isinstance(v, set)]
        if not path.is_file() or not sets:
            continue
        written = json.loads(path.read_text(encoding="utf-8"))
        written |= {k: sorted(written[k]) for k in sets if isinstance(written.get(k), list)}
        path.write_text(json.dumps(written, indent=2, sort_keys=True), encoding="utf-8")
