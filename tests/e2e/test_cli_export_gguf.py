"""The handover of a causal LoRA on a GGUF base: exported bound to the GGUF file's hash,
verified in a fresh process, and loaded where the bundle lies, its dequantized copy cached in
the lab's store or the user's cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import tunelab
from conftest import tl
from tunelab.cli import main
from tunelab.modeling.gguf import MARKER
from tunelab.stages.export.load import cache_root


def test_a_generative_lora_on_a_gguf_base_exports_and_verifies(tmp_path, capsys, monkeypatch):
    """The extraction demo's path: a causal LoRA on a GGUF base, bound to the GGUF's hash."""
    import yaml
    from make_tiny_gguf import write_tiny_gguf

    from conftest import extraction_spec, page_rows

    gguf = write_tiny_gguf(tmp_path / "tiny.gguf")
    lab = tmp_path / "gguf-lab"
    lab.mkdir()
    (lab / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in page_rows()))
    spec = extraction_spec(
        gguf,
        model={"path": str(gguf), "max_length": 320, "template": "plain"},
        evaluation={"batch_size": 4, "max_new_tokens": 12},  # 6 validation rows: 2 batches
    )
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(spec))
    for command in (["data"], ["baseline"], ["run", "--name", "lora"], ["compare"]):
        assert main([command[0], "--lab", str(lab), *command[1:], "--json"]) == 0, command
    capsys.readouterr()
    code, bundle = tl(capsys, "export", "r002-lora", "--lab", str(lab))
    assert code == 0 and bundle["base_model"]["weights_sha256"] == tunelab_sha_file(gguf)
    info = json.loads((Path(bundle["bundle"]) / "tunelab.json").read_text())
    assert info["base_model"]["format"] == "gguf" and info["kind"] == "causal"
    assert info["limitations"]["truncation"]["n"] == 6  # the validation split, as rendered
    code, result = tl(capsys, "verify", bundle["bundle"])
    assert code == 0 and result["passed"], result["items"]
    # a generative bundle keeps one whole evaluation batch, the run's first (shortest prompts)
    assert (
        "4 of 4 validation predictions reproduced (the bundle's sample of the split's 6); every "
        "one must" in result["items"][-1]["detail"]
    )

    # load_bundle dequantizes the GGUF into a named cache: the lab's store, else the user's
    assert cache_root(Path(bundle["bundle"])) == lab / ".tunelab" / "cache"
    outside = Path(shutil.copytree(bundle["bundle"], tmp_path / "elsewhere" / "bundle"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root(outside) == tmp_path / "xdg" / "tunelab"
    model, _, _ = tunelab.load_bundle(outside)
    assert type(model).__name__ == "PeftModelForCausalLM"
    copy = tmp_path / "xdg" / "tunelab" / "gguf" / tunelab_sha_file(gguf)
    assert (copy / MARKER).is_file() and (copy / "model.safetensors").is_file()
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root(outside) == tmp_path / "home" / ".cache" / "tunelab"


def tunelab_sha_file(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()
