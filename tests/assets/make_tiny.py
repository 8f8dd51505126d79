"""Build the tiny models the tests use, with tokenizers trained here: a 2-layer BERT and a
2-layer llama with a ChatML chat template (pad = EOS = `<|im_end|>`, the classic trap).

Nothing is downloaded. `python tests/assets/make_tiny.py OUT` writes `OUT/tiny-bert/` and
`OUT/tiny-llama/`; the test suite builds them once per session.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from tokenizers import (
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)
from transformers import (
    BertConfig,
    BertModel,
    BertTokenizerFast,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

CORPUS = [
    "the market rallied as shares rose and profits beat forecasts",
    "the bank cut interest rates and the economy grew faster than expected",
    "the team won the match with a late goal and the fans cheered",
    "the striker scored twice as the club reached the cup final",
    "the new phone has a faster chip and a brighter screen",
    "software update fixes security flaws in the browser and the network",
    "the film won an award and the actor thanked the director",
    "the band released a new album and announced a world tour",
    "parliament voted on the bill and the minister resigned",
    "the election campaign focused on taxes schools and hospitals",
]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


BERT_VOCAB = Path(__file__).with_name("tiny_bert_vocab.txt")
"""The tiny BERT's WordPiece vocabulary, one token a line in id order: `train_wordpiece`'s
output, kept. tokenizers' WordPiece trainer breaks ties between equally frequent merges in its
hash maps' order, which differs from process to process: each test worker got its own
vocabulary (other tokens, other ids), so a test's numbers depended on the worker it ran in (a
planted-overfitting test failed one run in six). `python tests/assets/make_tiny.py --vocab`
trains one again and writes it here."""


def train_wordpiece(vocab_size: int = 200) -> BertTokenizerFast:
    """A WordPiece tokenizer trained on CORPUS (not the same twice: see `BERT_VOCAB`)."""
    tok = _bert_tokenizer(models.WordPiece(unk_token="[UNK]"))
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIALS)
    tok.train_from_iterator(CORPUS * 5, trainer)
    return _bert_fast(tok)


def tiny_bert_tokenizer() -> BertTokenizerFast:
    """The tiny BERT's tokenizer: WordPiece over the kept vocabulary (`BERT_VOCAB`)."""
    tokens = BERT_VOCAB.read_text(encoding="utf-8").split("\n")[:-1]
    vocab = {token: i for i, token in enumerate(tokens)}
    return _bert_fast(_bert_tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]")))


def _bert_tokenizer(model) -> Tokenizer:
    tok = Tokenizer(model)
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def _bert_fast(tok: Tokenizer) -> BertTokenizerFast:
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return BertTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=512,
    )


def saved(model_class, config, tokenizer, out: Path) -> Path:
    """A model of `model_class` with weights drawn from seed 0, saved with its tokenizer."""
    torch.manual_seed(0)
    model_class(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_tiny_bert(out: Path) -> Path:
    """A 2-layer, 32-wide BERT with its tokenizer, saved like any local model."""
    out = Path(out)
    tokenizer = tiny_bert_tokenizer()
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id,
    )
    return saved(BertModel, config, tokenizer, out)


# Man-page-like facts for the tiny extraction labs (the tests' and bench/distributed.py's).
PAGES = [
    ("ls", "1", "list directory contents"),
    ("cp", "1", "copy files and directories"),
    ("printf", "3", "formatted output conversion"),
    ("mount", "8", "mount a filesystem"),
    ("passwd", "5", "the password file"),
    ("signal", "7", "overview of signals"),
]
PAGE_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "section": {"type": "string"},
        "summary": {"type": "string"},
    },
    "required": ["name", "section", "summary"],
}


CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
JSON_CORPUS = [
    '{"name": "ls", "section": "1", "summary": "list directory contents"}',
    '{"name": "printf", "section": "3", "summary": "formatted output conversion"}',
    "Extract the fields below from the text and answer with JSON only.",
    "NAME ls - list directory contents SYNOPSIS ls [OPTION]... [FILE]...",
]


def train_byte_bpe(vocab_size: int = 400) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator((CORPUS + JSON_CORPUS) * 5, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        bos_token="<|im_start|>",
        unk_token=None,
        model_max_length=256,
    )
    fast.chat_template = CHATML
    return fast


TINY_DECODER = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
}
"""The tiny decoders' shape (Llama-style configs: Llama, Qwen2)."""


def build_tiny_llama(out: Path) -> Path:
    """A 2-layer, 32-wide llama with a ChatML template, saved like any local model."""
    out = Path(out)
    tokenizer = train_byte_bpe()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        **TINY_DECODER,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    return saved(LlamaForCausalLM, config, tokenizer, out)


def build_tiny_gpt2(out: Path) -> Path:
    """A 2-layer, 32-wide GPT-2 whose tokenizer has no pad token, as GPT-2's has none: its
    blocks' linear layers are transformers' `Conv1D` (the weight stored transposed)."""
    out = Path(out)
    bpe = train_byte_bpe()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe.backend_tokenizer,
        eos_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        unk_token=None,
        model_max_length=256,
    )
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=256,
        n_embd=32,
        n_layer=2,
        n_head=4,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return saved(GPT2LMHeadModel, config, tokenizer, out)


if __name__ == "__main__" and sys.argv[1:] == ["--vocab"]:
    trained = train_wordpiece().get_vocab()
    BERT_VOCAB.write_text("".join(f"{t}\n" for t in sorted(trained, key=trained.get)))
    print(BERT_VOCAB)
elif __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "tiny-models")
    print(build_tiny_bert(root / "tiny-bert"))
    print(build_tiny_llama(root / "tiny-llama"))


def build_tiny_vit(out: Path) -> Path:
    """A ViT image classifier of 2 layers, 32 wide, on 32x32 images in patches of 8, with a
    5-class head (the base's, replaced by a lab's), random weights, and its image processor."""
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessorPil

    torch.manual_seed(0)
    config = ViTConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        image_size=32,
        patch_size=8,
        num_labels=5,
    )
    ViTForImageClassification(config).save_pretrained(out)
    ViTImageProcessorPil(size={"height": 32, "width": 32}).save_pretrained(out)
    return out


def build_tiny_resnet(out: Path) -> Path:
    """A small convnet (a ResNet of two basic stages, 8 and 16 channels: convolutions and
    batch normalisation, no linear layer in its blocks), random weights, with a
    shortest-edge-then-crop processor."""
    from transformers import ConvNextImageProcessorPil, ResNetConfig, ResNetForImageClassification

    torch.manual_seed(0)
    config = ResNetConfig(
        embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic", num_labels=5
    )
    ResNetForImageClassification(config).save_pretrained(out)
    ConvNextImageProcessorPil(size={"shortest_edge": 32}, crop_pct=0.875).save_pretrained(out)
    return out
