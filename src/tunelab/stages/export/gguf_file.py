"""`export --gguf`: the run's merged model as one GGUF file in the bundle (`gguf/model.gguf`:
a folder of its own, so that transformers' reader is not sent to the adapter's base).

The model written is the one the run evaluated: a LoRA folded into its base (the bundle's
`merged/` when `--merge` wrote it, else merged in memory), or a full fine-tune's weights. The
tokenizer and chat template are the run's own, from the bundle; when the base was itself a GGUF
file, llama.cpp's pre-tokenizer name is carried over from it. What was written is recorded in
`tunelab.json` (`gguf`), and `tunelab verify` reads the file back and reproduces the run's
answers from it (`verify_gguf.py`).
"""

from __future__ import annotations

from pathlib import Path

from tunelab.core.errors import TunelabError

GGUF_DIR, GGUF_FILE = "gguf", "model.gguf"


def write_bundle_gguf(bundle: Path, spec, lab, dtype: str, name: str) -> dict:
    """`name`: the file's `general.name` (the run and its base, where it had been the path of a
    temporary merged folder that no receiver has)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tunelab.modeling.gguf_write import write_gguf
    from tunelab.modeling.model import load_trained

    if spec.model_kind != "causal" or spec.model.scratch:
        kind = f"{'an' if spec.model_kind[0] in 'aeiou' else 'a'} {spec.model_kind} model"
        what = "trained from scratch" if spec.model.scratch else kind
        own = (
            ": its tokenizer is its own, which llama.cpp does not know by name. Export it "
            "without --gguf (weights, config and tokenizer, loaded by transformers)"
            if spec.model.scratch
            else ": export it without --gguf"
        )
        raise TunelabError(
            f"--gguf writes a causal language model fine-tuned from a pretrained base; this run "
            f"is {what}{own}"
        )
    if (bundle / "merged").is_dir():
        model = AutoModelForCausalLM.from_pretrained(bundle / "merged")
    else:
        model = load_trained(spec.model, lab.path, bundle, lab.device, None, spec.model_kind)
        if hasattr(model, "merge_and_unload"):
            model = model.merge_and_unload()
    tokenizer = AutoTokenizer.from_pretrained(bundle)
    (bundle / GGUF_DIR).mkdir(exist_ok=True)
    path = bundle / GGUF_DIR / GGUF_FILE
    written = write_gguf(model.cpu().eval(), tokenizer, path, dtype, _pre(spec, lab), name)
    return written | {
        "file": f"{GGUF_DIR}/{GGUF_FILE}",
        "llama_cpp": "not run at export: `tunelab verify` generates the validation sample in "
        "llama.cpp where it is built (`make gguf-runtime`), else says not checked",
    }


def _pre(spec, lab) -> str | None:
    """llama.cpp's pre-tokenizer name of a GGUF base (`tokenizer.ggml.pre`), else None."""
    from tunelab.modeling.gguf import is_gguf_path

    if not spec.model.path or not is_gguf_path(spec.model.path):
        return None
    import gguf

    field = gguf.GGUFReader(str(spec.model.location(lab.path))).fields.get("tokenizer.ggml.pre")
    return field.contents() if field is not None else None
