"""Write a tiny llama as a GGUF file, the way llama.cpp's converter lays one out.

Nothing is downloaded. A 2-layer, 64-wide llama (grouped key/value heads) is built from a config
with a fixed seed, a byte-level BPE tokenizer is trained here with `tokenizers`, and both are
written with the `gguf` package under llama.cpp's names (`token_embd.weight`,
`blk.0.attn_q.weight`, ...). Like llama.cpp, q and k rows are permuted on the way in (transformers
undoes it when it reads the file). The feed-forward weights are stored as Q8_0 blocks, so reading
the file back really dequantizes; everything else is F32.

`python tests/assets/make_tiny_gguf.py OUT` writes `OUT/tiny-llama.gguf`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM

CORPUS = [
    "the capital of france is paris",
    "the market rallied as shares rose and profits beat forecasts",
    "the team won the match with a late goal and the fans cheered",
    "the new phone has a faster chip and a brighter screen",
    '{"name": "ada", "age": 36}',
]
EOS = "<|endoftext|>"
HIDDEN, LAYERS, HEADS, KV_HEADS, FFN = 64, 2, 4, 2, 128
Q8_TENSORS = ("ffn_gate", "ffn_up", "ffn_down")


def train_byte_bpe(vocab_size: int = 320) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 10, trainer)
    return tok


def tiny_llama(vocab_size: int) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=128,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # norms away from 1.0, so a mixed-up norm tensor would show
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    return model


def permute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's `LlamaModel.permute` (convert_hf_to_gguf.py): HF rotary halves -> interleaved."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def gguf_tensors(model: LlamaForCausalLM) -> dict[str, np.ndarray]:
    """HF state dict -> {llama.cpp name: float32 array in HF (out, in) order}."""
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    out = {
        "token_embd.weight": sd["model.embed_tokens.weight"],
        "output_norm.weight": sd["model.norm.weight"],
        "output.weight": sd["lm_head.weight"],
    }
    parts = {
        "attn_norm": "input_layernorm",
        "attn_q": "self_attn.q_proj",
        "attn_k": "self_attn.k_proj",
        "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj",
        "ffn_norm": "post_attention_layernorm",
        "ffn_gate": "mlp.gate_proj",
        "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj",
    }
    for i in range(LAYERS):
        for gguf_part, hf_part in parts.items():
            w = sd[f"model.layers.{i}.{hf_part}.weight"]
            if gguf_part == "attn_q":
                w = permute_qk(w, HEADS)
            elif gguf_part == "attn_k":
                w = permute_qk(w, KV_HEADS)
            out[f"blk.{i}.{gguf_part}.weight"] = w
    return out


def write_tiny_gguf(path: Path) -> Path:
    """Write the tiny llama + tokenizer to `path` (a `.gguf` file) and return it."""
    import gguf

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok = train_byte_bpe()
    vocab = tok.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    merges = json.loads(tok.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    eos_id = vocab[EOS]
    token_types = [gguf.TokenType.CONTROL if t == EOS else gguf.TokenType.NORMAL for t in tokens]
    model = tiny_llama(len(tokens))

    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tiny-llama")
    w.add_context_length(model.config.max_position_embeddings)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_rope_freq_base(model.config.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(model.config.rms_norm_eps)
    w.add_vocab_size(len(tokens))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types(token_types)
    w.add_token_merges(merges)
    w.add_bos_token_id(eos_id)
    w.add_eos_token_id(eos_id)
    for name, arr in gguf_tensors(model).items():
        if name.split(".")[-2] in Q8_TENSORS:
            q = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, np.ascontiguousarray(arr, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def expected_hf_weights(path: Path) -> dict[str, torch.Tensor]:
    """The HF state dict the file stands for: the originals, feed-forward weights round-tripped
    through Q8_0 exactly as a reader dequantizes them (the llama q/k permutation undone)."""
    import gguf

    tok = train_byte_bpe()
    model = tiny_llama(tok.get_vocab_size())
    expected = {k: v.detach().float().clone() for k, v in model.state_dict().items()}
    reader = gguf.GGUFReader(path)
    names = {"ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    for t in reader.tensors:
        part = t.name.split(".")[-2]
        if part in names:
            block = t.name.split(".")[1]
            deq = gguf.quants.dequantize(t.data, t.tensor_type)
            expected[f"model.layers.{block}.{names[part]}.weight"] = torch.from_numpy(deq.copy())
    return expected


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tiny-models") / "tiny-llama.gguf"
    print(write_tiny_gguf(out))
