"""The GGUF writer on the tiny llama: read back by transformers' GGUF reader (which undoes
llama.cpp's rotary permutation), the logits are the model's (exactly at f32), and the file
carries the tokenizer, its special ids and the chat template it was trained with."""

from __future__ import annotations

import gguf
import pytest
import torch
from make_tiny import TINY_DECODER
from transformers import AutoModelForCausalLM, AutoTokenizer, BertConfig, BertModel

from tunelab.core.errors import TunelabError
from tunelab.modeling.gguf_write import permute, write_gguf

TEXT = "the market rallied as shares rose and profits beat forecasts"


@pytest.fixture(scope="module")
def tiny(tiny_llama):
    model = AutoModelForCausalLM.from_pretrained(tiny_llama).eval()
    return model, AutoTokenizer.from_pretrained(tiny_llama)


@pytest.mark.parametrize("dtype, tolerance", [("f32", 0.0), ("f16", 1e-3), ("q8_0", 2e-2)])
def test_read_back_the_logits_and_tokens_are_the_models(tiny, tmp_path, dtype, tolerance):
    model, tokenizer = tiny
    written = write_gguf(model, tokenizer, tmp_path / "m.gguf", dtype)
    output = 0 if model.config.tie_word_embeddings else 1  # tied: no output.weight of its own
    assert written["tensors"] == 2 + 9 * model.config.num_hidden_layers + output
    back = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file="m.gguf").eval()
    read = AutoTokenizer.from_pretrained(tmp_path, gguf_file="m.gguf")
    ids = tokenizer(TEXT, return_tensors="pt")["input_ids"]
    assert torch.equal(read(TEXT, return_tensors="pt")["input_ids"], ids)
    with torch.no_grad():
        worst = float((model(ids).logits - back(ids).logits).abs().max())
    assert worst <= tolerance
    assert read.chat_template == tokenizer.chat_template
    assert (read.eos_token_id, read.bos_token_id) == (
        tokenizer.eos_token_id,
        tokenizer.bos_token_id,
    )


def test_a_qwen2_is_written_with_its_biases_and_without_the_permutation(tiny, tmp_path):
    """Qwen2: the query, key and value biases written (random, not zero, so a missing or
    misplaced one shows), no rotary permutation (llama.cpp's Qwen2Model keeps the halves),
    tied embeddings; read back by transformers' GGUF reader to the same logits at f32."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = tiny[1]
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        **TINY_DECODER,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0, 0.5)
    written = write_gguf(model, tokenizer, tmp_path / "q.gguf", "f32")
    assert written["architecture"] == "qwen2" and written["tensors"] == 2 + 12 * 2
    fields = gguf.GGUFReader(str(tmp_path / "q.gguf")).fields
    assert fields["general.architecture"].contents() == "qwen2"
    back = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file="q.gguf").eval()
    ids = tokenizer(TEXT, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert float((model(ids).logits - back(ids).logits).abs().max()) <= 1e-5


def test_the_metadata_names_the_template_and_special_tokens(tiny, tmp_path):
    model, tokenizer = tiny
    write_gguf(model, tokenizer, tmp_path / "m.gguf", "f16", pre="smollm", name="r003-lora (x)")
    fields = gguf.GGUFReader(str(tmp_path / "m.gguf")).fields
    value = {k: fields[k].contents() for k in fields}
    assert value["general.architecture"] == "llama"
    assert value["general.name"] == "r003-lora (x)"  # not a temporary folder's path
    assert value["tokenizer.chat_template"] == tokenizer.chat_template
    assert value["tokenizer.ggml.eos_token_id"] == tokenizer.eos_token_id
    assert value["tokenizer.ggml.pre"] == "smollm" and value["tokenizer.ggml.model"] == "gpt2"
    assert value["tokenizer.ggml.add_bos_token"] is False
    tokens = value["tokenizer.ggml.tokens"]
    assert tokens[tokenizer.eos_token_id] == tokenizer.eos_token
    assert value["tokenizer.ggml.token_type"][tokenizer.eos_token_id] == 3  # control


def test_the_rotary_permutation_interleaves_each_heads_halves():
    w = torch.arange(8.0).reshape(8, 1)  # one head of 8 rows: halves 0-3 and 4-7
    assert permute(w, 1).flatten().tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


def test_another_architecture_is_refused_naming_it(tiny, tmp_path):
    bert = BertModel(
        BertConfig(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            vocab_size=100,
        )
    )
    with pytest.raises(TunelabError, match="this one is 'bert'"):
        write_gguf(bert, tiny[1], tmp_path / "m.gguf")
