"""`verify`'s `gguf` item: the bundle's `model.gguf` read back and the run's answers reproduced.

The file is opened with transformers' GGUF reader alone (the tokenizer too: vocabulary,
merges, special tokens and chat template all come from the file), and the stored validation
sample is answered again under the run's protocol. A float32 file must give every answer
exactly; a float16 or q8_0 one at least `AGREE` of them, and the detail says how many agreed.

Then llama.cpp itself, where it is built (`make gguf-runtime`), answers the same sample from
the file (`llama_cpp_check.py`): the same prompt token ids, greedy, the same limit and stop
tokens. How many of its answers are the run's own is recorded (`llama_cpp`) and said; below its
rule (every answer from f32 or f16 weights, 90% from q8_0) the item fails. Where its default
kernels crash (AMX on a q8_0 file has), it answers without them and the detail says so. Where
llama.cpp is not built, the file does not load in it or it crashes both ways, the item says
"not checked" and why (`not_checked`: a warning mark, never a pass).
"""

from __future__ import annotations

import json
from pathlib import Path

from tunelab.modeling.gguf import read_once
from tunelab.stages.export.gguf_file import GGUF_DIR, GGUF_FILE
from tunelab.stages.export.llama_cpp_check import describe, llama_cpp_answers, passes

AGREE = 0.9
"""Share of the sample's answers a float16 or q8_0 file must reproduce."""


def check_gguf(bundle: Path, info: dict, device: str, predictions, item) -> dict:
    """`predictions(bundle, info, loaded, device)` is verify's own reproduction of the sample;
    `item` its checklist entry."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    written = info.get("gguf") or {}
    folder = bundle / GGUF_DIR
    with read_once():  # the file's header read once for the model and its tokenizer
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_FILE)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE)
    model = model.to(device).eval()
    trained = AutoTokenizer.from_pretrained(bundle)
    same = {
        "chat template": tokenizer.chat_template == trained.chat_template,
        "EOS": tokenizer.eos_token_id == trained.eos_token_id,
        "BOS": tokenizer.bos_token_id == trained.bos_token_id,
    }
    found = predictions(bundle, info, {"model": model, "tokenizer": tokenizer}, device)
    lines = (bundle / "verify" / "sample.jsonl").read_text(encoding="utf-8").splitlines()
    sample = [json.loads(line) for line in lines if line.strip()]
    n = len(sample)
    agreed = n - len(found["differ"])
    dtype = written.get("dtype", "?")
    exact = dtype == "f32"
    passed = all(same.values()) and (found["passed"] if exact else agreed >= AGREE * n)
    del model  # llama.cpp loads the file next
    llama = llama_cpp_answers(bundle, info, sample, folder / GGUF_FILE, dtype)
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
        + f"; {describe(llama)}"
    )
    unchecked = {} if llama["checked"] or not passed else {"not_checked": llama["why"]}
    return item(
        "gguf",
        passed and passes(llama),  # never a pass where llama.cpp did not run: not checked
        detail,
        agreed=agreed,
        n=n,
        dtype=dtype,
        differ=found["differ"],
        llama_cpp=llama,
        **unchecked,
    )
