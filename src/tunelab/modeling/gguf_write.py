"""A merged Llama- or Qwen2-architecture model and its tokenizer written as one GGUF file
(llama.cpp's format), with the `gguf` package's writer and the conversion rules of llama.cpp's
own `convert_hf_to_gguf.py` for the architecture, written out here so that nothing depends on a
script of another project that moves.

- **Hyperparameters** from the model's config: context length, width, blocks, feed-forward
  width, heads and key/value heads, the rotary dimension and base, the RMSNorm epsilon.
- **Tensors** under llama.cpp's names (`token_embd`, `blk.N.attn_q`, ..., `output`). For
  Llama the query and key projections are permuted from Hugging Face's rotary layout (halves)
  to llama.cpp's (interleaved pairs), as llama.cpp's `LlamaModel` does; Qwen2 keeps the halves
  (its `Qwen2Model` does not permute) and adds the query, key and value biases. Norms and
  biases stay float32, the matrices are float32 or float16 (`dtype`), or `q8_0` (blocks of 32
  with a float16 scale, `gguf.quants`).
- **Tokenizer** from the run's own tokenizer (a byte-level BPE): every token by id, control
  tokens marked, the merges, BOS/EOS/padding ids, whether BOS is added, and the chat template
  the run was trained with. llama.cpp also picks its pre-tokenizer by a name (`pre`): the
  base GGUF's when the run started from one, else `default` (said in what is returned).

Anything else (another architecture, a tokenizer that is not a BPE) is refused with the
reason. `tunelab verify` reads the file back through transformers' GGUF reader (which undoes
the permutation, as llama.cpp's loader expects it) and reproduces the run's predictions.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from tunelab.core.errors import TunelabError
from tunelab.modeling.template import adds_bos

DTYPES = ("f32", "f16", "q8_0")
PERMUTED = {"llama": True, "qwen2": False}
"""The architectures written, by `model_type` (llama.cpp's name is the same), and whether the
query and key projections are permuted to llama.cpp's rotary layout."""
BIASES = ("q_proj", "k_proj", "v_proj")
"""Attention projections whose biases are written when the model has them (Qwen2's)."""
BLOCK = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
"""A Llama block's modules by llama.cpp's tensor names (`blk.N.<name>.weight`)."""


def permute(weights: torch.Tensor, heads: int) -> torch.Tensor:
    """Hugging Face's rotary halves to llama.cpp's interleaved pairs, per head (llama.cpp's
    `LlamaModel.permute`)."""
    rows = weights.shape[0]
    return (
        weights.reshape(heads, 2, rows // heads // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def write_gguf(
    model: torch.nn.Module,
    tokenizer,
    path: Path,
    dtype: str = "f16",
    pre: str | None = None,
    name: str = "tunelab merged model",
) -> dict:
    """Write `model` (a transformers LlamaForCausalLM or Qwen2ForCausalLM, merged) and
    `tokenizer` to `path`, named `name` (`general.name`, what llama.cpp shows);
    returns what was written (architecture, dtype, tensors, the tokenizer's special ids, the
    chat template's presence, the pre-tokenizer name)."""
    import gguf

    config = model.config
    arch = config.model_type
    if arch not in PERMUTED:
        raise TunelabError(
            f"--gguf writes Llama- and Qwen2-architecture models (this one is {arch!r}); "
            "export --merge and convert merged/ with llama.cpp's own converter"
        )
    if dtype not in DTYPES:
        raise TunelabError(f"--gguf {dtype!r}: choose one of {list(DTYPES)}")
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(name)
    _hyperparameters(writer, config, dtype)
    special = _tokenizer(writer, tokenizer, pre or "default")
    names = _tensors(writer, model, config, dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return {
        "file": path.name,
        "architecture": arch,
        "dtype": dtype,
        "tensors": len(names),
        "tokenizer": special | {"pre": pre or "default"},
    }


def _hyperparameters(writer, config, dtype: str) -> None:
    import gguf

    heads = config.num_attention_heads
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(heads)
    writer.add_head_count_kv(config.num_key_value_heads or heads)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(float(_rope_theta(config)))
    writer.add_layer_norm_rms_eps(float(config.rms_norm_eps))
    writer.add_vocab_size(config.vocab_size)
    writer.add_file_type(
        {
            "f32": gguf.LlamaFileType.ALL_F32,
            "f16": gguf.LlamaFileType.MOSTLY_F16,
            "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
        }[dtype]
    )


def _rope_theta(config) -> float:
    theta = getattr(config, "rope_theta", None)
    if theta is None:  # transformers 5 keeps it in rope_parameters
        theta = (getattr(config, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
    return theta


def _tokenizer(writer, tokenizer, pre: str) -> dict:
    """The BPE tokenizer's vocabulary, merges, special ids and chat template."""
    state = json.loads(tokenizer.backend_tokenizer.to_str())
    bpe = state["model"]
    if bpe.get("type") != "BPE":
        raise TunelabError(
            f"--gguf writes byte-level BPE tokenizers (this one is {bpe.get('type')!r})"
        )
    vocab = dict(bpe["vocab"])
    for added in state.get("added_tokens", []):
        vocab[added["content"]] = added["id"]
    size = max(vocab.values()) + 1
    tokens = [f"[PAD{i}]" for i in range(size)]
    for token, i in vocab.items():
        tokens[i] = token
    control = {a["id"] for a in state.get("added_tokens", []) if a.get("special")}
    types = [3 if i in control else 1 for i in range(size)]  # llama.cpp: 3 control, 1 normal
    merges = [m if isinstance(m, str) else " ".join(m) for m in bpe.get("merges", [])]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    special = {
        "bos": tokenizer.bos_token_id,
        "eos": tokenizer.eos_token_id,
        "pad": tokenizer.pad_token_id,
    }
    for name, add in (
        ("bos", writer.add_bos_token_id),
        ("eos", writer.add_eos_token_id),
        ("pad", writer.add_pad_token_id),
    ):
        if special[name] is not None:
            add(special[name])
    # as the tokenizer itself does, post-processor included (llama.cpp's converter reads it so)
    add_bos = adds_bos(tokenizer)
    writer.add_add_bos_token(add_bos)
    if tokenizer.chat_template:
        writer.add_chat_template(tokenizer.chat_template)
    return {**special, "add_bos": add_bos, "chat_template": bool(tokenizer.chat_template)}


def _tensors(writer, model, config, dtype: str) -> list[str]:
    import gguf
    from gguf.quants import quantize

    heads = config.num_attention_heads
    kv_heads = config.num_key_value_heads or heads
    state = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    named = {"token_embd.weight": state["model.embed_tokens.weight"]}
    named["output_norm.weight"] = state["model.norm.weight"]
    if not config.tie_word_embeddings:
        named["output.weight"] = state["lm_head.weight"]
    permuted = PERMUTED[config.model_type]
    for i in range(config.num_hidden_layers):
        for module, name in BLOCK.items():
            tensor = state[f"model.layers.{i}.{module}.weight"]
            if permuted and name == "attn_q":
                tensor = permute(tensor, heads)
            elif permuted and name == "attn_k":
                tensor = permute(tensor, kv_heads)
            named[f"blk.{i}.{name}.weight"] = tensor
        for projection in BIASES:
            bias = state.get(f"model.layers.{i}.self_attn.{projection}.bias")
            if bias is not None:
                named[f"blk.{i}.{BLOCK['self_attn.' + projection]}.bias"] = bias
    for name, tensor in named.items():
        data = tensor.numpy()
        if data.ndim == 1 or dtype == "f32":  # norms and biases stay float32, as in llama.cpp
            writer.add_tensor(name, data.astype(np.float32))
        elif dtype == "f16":
            writer.add_tensor(name, data.astype(np.float16))
        else:
            kind = gguf.GGMLQuantizationType.Q8_0
            writer.add_tensor(name, quantize(data, kind), raw_dtype=kind)
    return list(named)
