"""The model card's Serving section (whether LoRA-only engines load the adapter, what to serve
instead) and its paragraph on the bundle's GGUF file."""

from __future__ import annotations

from tunelab.stages.export.serving import MERGED_CLASS


def serving_lines(serving: dict | None, kind: str) -> list[str]:
    """The card's Serving section: whether LoRA-only engines load the adapter, and what to
    serve instead when they do not."""
    if not serving:
        return []
    lines = ["", "## Serving", ""]
    if serving["plain_lora"] is None:
        return [*lines, f"Serve {serving['servable']}."]
    if serving["plain_lora"]:
        return [
            *lines,
            "A plain LoRA (only low-rank matrices of the base's linear layers): an engine that "
            "serves LoRA adapters for this architecture can take it as it is (which "
            "architectures an engine serves LoRA for is its own list).",
        ]
    lines.append(
        "**Not a plain LoRA: engines that load only LoRA matrices (vLLM's LoRA loader, for "
        "one) refuse it.** Why:"
    )
    lines += ["", *(f"- {w}" for w in serving["why"]), ""]
    lines.append(
        f"Serve {serving['servable']}. The merged folder loads with transformers alone "
        f"(`{MERGED_CLASS[kind]}.from_pretrained(merged/)`), and `tunelab verify` checks "
        "that it gives the run's predictions."
    )
    return lines


def gguf_lines(gguf: dict | None, method: str) -> list[str]:
    """The bundle's GGUF file (`export --gguf`), for llama.cpp: what it holds and how it is
    checked."""
    if not gguf:
        return []
    chat = "its chat template, " if gguf["tokenizer"].get("chat_template") else ""
    model = "the LoRA merged into the base" if method == "lora" else "the fine-tuned model"
    return [
        "",
        f"`{gguf['file']}`: {model} as one GGUF file for llama.cpp "
        f"({gguf['architecture']}, {gguf['dtype']}, {gguf['tensors']} tensors), with the run's "
        f"tokenizer, {chat}BOS and EOS embedded, for `llama-cli -m {gguf['file']}` or a "
        "llama.cpp-based server to load alone. Whether this file was run in llama.cpp is "
        "`tunelab verify`'s to say: it reads the file back, and where llama.cpp is built (`make "
        "gguf-runtime`) generates the validation sample with it; where not, it says "
        '"not checked".',
    ]
