"""Build the tiny models the tests use: a WordPiece tokenizer trained here, a 2-layer BERT.

Nothing is downloaded. `python tests/assets/make_tiny.py OUT` writes `OUT/tiny-bert/`; the
test suite calls `build_tiny_bert` once per session.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from transformers import BertConfig, BertModel, BertTokenizerFast

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


def train_wordpiece(vocab_size: int = 200) -> BertTokenizerFast:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIALS)
    tok.train_from_iterator(CORPUS * 5, trainer)
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


def build_tiny_bert(out: Path) -> Path:
    """A 2-layer, 32-wide BERT with its tokenizer, saved like any local model."""
    out = Path(out)
    tokenizer = train_wordpiece()
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "tiny-models") / "tiny-bert"
    print(build_tiny_bert(target))
