import torch

from tunelab.core.spec import ModelSpec
from tunelab.modeling.classifier_inputs import collate, encode_classification
from tunelab.modeling.model import load_tokenizer


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


def test_a_split_is_tokenised_a_chunk_at_a_time_to_the_same_inputs(tiny_bert, monkeypatch):
    """The whole split's untruncated token lists alive at once took 14 GB at 100,000 news
    articles; a chunk at a time gives the same inputs, and each keeps its length before the
    cut (what inspect reports, where it tokenised the split a second time)."""
    from tunelab.modeling import classifier_inputs

    tok = load_tokenizer(ModelSpec(path=str(tiny_bert)), tiny_bert)
    text = "the market rose "
    rows = [{"id": str(i), "text": text * (i % 9 + 1), "label": "a"} for i in range(7)]
    whole = encode_classification(tok, rows, ["a"], max_length=12)
    monkeypatch.setattr(classifier_inputs, "ENCODE_CHUNK", 3)
    calls = []
    real = type(tok).__call__

    def counted(self, texts, **kwargs):
        calls.append(len(texts))
        return real(self, texts, **kwargs)

    monkeypatch.setattr(type(tok), "__call__", counted)
    assert encode_classification(tok, rows, ["a"], max_length=12) == whole
    assert calls == [3, 3, 1]
    lengths = [len(tok(r["text"])["input_ids"]) for r in rows]
    assert [e.tokens for e in whole] == lengths
    assert [e.truncated for e in whole] == [n > 12 for n in lengths]
