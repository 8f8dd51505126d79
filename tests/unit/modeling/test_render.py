import torch

from tunelab.core.spec import ModelSpec
from tunelab.modeling.model import load_tokenizer
from tunelab.modeling.render import collate, encode_classification


def test_truncation_keeps_the_closing_separator_and_is_flagged(tiny_bert):
    tok = load_tokenizer(ModelSpec(path=str(tiny_bert)), tiny_bert)
    long = {"id": "x", "text": "the market " * 40, "label": "b"}
    short = {"id": "y", "text": "the market", "label": "a"}
    enc = encode_classification(tok, [long, short], ["a", "b"], max_length=16)
    assert len(enc[0].input_ids) == 16 and enc[0].truncated
    assert enc[0].input_ids[-1] == tok.sep_token_id
    assert not enc[1].truncated and enc[1].label == 0


def test_collate_pads_to_the_longest_in_the_batch(tiny_bert):
    tok = load_tokenizer(ModelSpec(path=str(tiny_bert)), tiny_bert)
    enc = encode_classification(
        tok,
        [
            {"id": "a", "text": "bank", "label": "a"},
            {"id": "b", "text": "the bank cut rates", "label": "a"},
        ],
        ["a"],
        32,
    )
    batch = collate(enc, tok.pad_token_id, torch.device("cpu"))
    width = max(len(e.input_ids) for e in enc)
    assert batch["input_ids"].shape == (2, width)
    assert batch["attention_mask"].sum().item() == sum(len(e.input_ids) for e in enc)
