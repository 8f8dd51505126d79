"""Whether a bundle's adapter loads where models are served, said at export and in the card.

Serving engines that apply LoRA adapters per request (vLLM's LoRA loader among them) take only
the low-rank matrices of the base's linear layers. vLLM's PEFT check refuses an adapter with
`modules_to_save` (whole trained modules: tunelab keeps a classifier's new head that way; its
newest releases accept a classification model's `classifier` or `score` alone), DoRA, and a
LoRA bias; LoRA on the output head or the embeddings, or trainable token rows, are not loaded
by every engine either. A bundle whose adapter has none of these is a *plain LoRA*; any other
is served in its merged form (`tunelab export RUN --merge`: the LoRA folded into the weights,
`merged/`), which `tunelab verify` loads with transformers alone and checks against the run's
predictions. A full fine-tune is its own merged form.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

HEADS_AND_EMBEDDINGS = (
    "lm_head",
    "embed_tokens",
    "wte",
    "word_embeddings",
    "embed_in",
    "embed_out",
)
"""Module names of output heads and embeddings: LoRA on them is not loaded by every engine."""


MERGED_CLASS = {
    "causal": "AutoModelForCausalLM",
    "encoder": "AutoModelForSequenceClassification",
    "image": "AutoModelForImageClassification",
}
"""The transformers class that loads a bundle's merged/ folder alone, by model kind."""


def serving(
    bundle: Path,
    method: str,
    merged: bool,
    run: str = "RUN",
    lab: Path | None = None,
    final: Path | None = None,
) -> dict:
    """How the bundle of `run` (in `lab`) is served: `plain_lora` (None for a full fine-tune),
    the reasons it is not one, and the servable form. `bundle`: the folder being written;
    `final`: where it will be once whole (the commands name that one)."""
    if method != "lora":
        return {
            "plain_lora": None,
            "why": [],
            "servable": "the bundle's own weights (trained whole: nothing to merge)",
        }
    config = json.loads((bundle / "adapter_config.json").read_text(encoding="utf-8"))
    why = not_plain(config | {"modules_to_save": saved_modules(bundle, config)})
    if not why:
        servable = "the adapter as it is (a plain LoRA)"
    elif merged:
        servable = "merged/ (the LoRA folded into the weights; verify loads it alone)"
    else:
        # another --out: this bundle's folder is taken (the command as printed was refused).
        # Absolute: the line goes into the bundle's hashed model card, read elsewhere (relative
        # to the shell the export ran in, it meant nothing there and its bytes hung on the cwd)
        where = Path(final or bundle).resolve()
        again = shlex.quote(f"{where}-merged")
        again += f" --lab {shlex.quote(str(Path(lab).resolve()))}" if lab else ""
        servable = f"the merged form: run `tunelab export {run} --merge --out {again}`"
    return {"plain_lora": not why, "why": why, "servable": servable}


def saved_modules(bundle: Path, config: dict) -> list[str]:
    """The adapter config's `modules_to_save` that the adapter holds weights of: PEFT lists
    both a BERT's and a decoder's head name for any sequence classifier (Qwen3's bundle said
    "modules_to_save ['classifier', 'score']", with no `classifier`)."""
    from safetensors import safe_open

    listed = config.get("modules_to_save") or []
    path = bundle / "adapter_model.safetensors"
    if not listed or not path.is_file():
        return listed
    with safe_open(str(path), framework="numpy") as f:
        keys = [f".{k}." for k in f.keys()]  # noqa: SIM118 (safe_open has no __iter__)
    return [m for m in listed if any(f".{m}." in k for k in keys)]


def not_plain(config: dict) -> list[str]:
    """What in a PEFT adapter config keeps LoRA-only engines from loading it."""
    why = []
    saved = config.get("modules_to_save") or []
    if saved:
        why.append(
            f"modules_to_save {sorted(set(saved))}: whole trained modules, not LoRA matrices (vLLM "
            "accepts none, or a classification head named classifier or score in its newest "
            "releases)"
        )
    targets = config.get("target_modules") or []
    names = [targets] if isinstance(targets, str) else list(targets)
    special = sorted(
        n for n in names if any(n == h or n.endswith("." + h) for h in HEADS_AND_EMBEDDINGS)
    )
    if special:
        why.append(f"LoRA on {special}: not every engine loads LoRA on heads or embeddings")
    if config.get("use_dora"):
        why.append("DoRA: vLLM does not load it")
    if config.get("bias", "none") != "none" or config.get("lora_bias"):
        why.append("a LoRA bias: vLLM does not load it")
    if config.get("trainable_token_indices"):
        why.append("trainable token rows: not LoRA matrices")
    return why
