"""`verify`'s `gguf` item: the bundle's `model.gguf` read back and the run's answers reproduced.

The file is opened with transformers' GGUF reader alone (the tokenizer too: vocabulary,
merges, special tokens and chat template all come from the file), and the stored validation
sample is answered again under the run's protocol. A float32 file must give every answer
exactly; a float16 or q8_0 one at least `AGREE` of them, and the detail says how many agreed.
Whether llama.cpp itself gives the same answers is said as the export recorded it ("not
checked" where no llama.cpp runtime was built), never as passed.
"""

from __future__ import annotations

from pathlib import Path

from tunelab.stages.export.gguf_file import GGUF_DIR, GGUF_FILE

AGREE = 0.9
"""Share of the sample's answers a float16 or q8_0 file must reproduce."""


def check_gguf(bundle: Path, info: dict, device: str, predictions, item) -> dict:
    """`predictions(bundle, info, loaded, device)` is verify's own reproduction of the sample;
    `item` its checklist entry."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    written = info.get("gguf") or {}
    folder = bundle / GGUF_DIR
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_FILE).to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE)
    trained = AutoTokenizer.from_pretrained(bundle)
    same = {
        "chat template": tokenizer.chat_template == trained.chat_template,
        "EOS": tokenizer.eos_token_id == trained.eos_token_id,
        "BOS": tokenizer.bos_token_id == trained.bos_token_id,
    }
    found = predictions(bundle, info, {"model": model, "tokenizer": tokenizer}, device)
    sample = (bundle / "verify" / "sample.jsonl").read_text(encoding="utf-8").splitlines()
    n = sum(1 for line in sample if line.strip())
    agreed = n - len(found["differ"])
    dtype = written.get("dtype", "?")
    exact = dtype == "f32"
    passed = all(same.values()) and (found["passed"] if exact else agreed >= AGREE * n)
    rule = "every answer, as f32" if exact else f"{AGREE:.0%} of them at {dtype}"
    wrong = [k for k, ok in same.items() if not ok]
    detail = (
        f"{GGUF_DIR}/{GGUF_FILE} ({dtype}) read back with transformers' GGUF reader: "
        f"{agreed} of {n} answers agree ({rule} must); "
        + (
            f"differs from the trained tokenizer: {', '.join(wrong)}"
            if wrong
            else "chat template, BOS and EOS as trained"
        )
        + f"; llama.cpp: {written.get('llama_cpp', 'not checked')}"
    )
    return item("gguf", passed, detail, agreed=agreed, n=n, dtype=dtype, differ=found["differ"])
