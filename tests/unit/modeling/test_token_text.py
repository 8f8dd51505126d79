"""Each token's text in its place, as `tunelab inspect` shows it: a WordPiece's words apart and
its `##` pieces joined; a character split across byte-level tokens shown whole."""

from __future__ import annotations

from make_tiny import tiny_bert_tokenizer, train_byte_bpe
from tokenizers import decoders

from tunelab.modeling.token_text import token_texts


def test_wordpiece_tokens_read_as_words_not_one_run_of_pieces():
    """Decoded one by one, a BERT's tokens read "[CLS]thecatsatonthemat[SEP]"."""
    tok = tiny_bert_tokenizer()
    tok.backend_tokenizer.decoder = decoders.WordPiece()  # a real BERT's, as it ships
    ids = tok("the cat sat on the mat")["input_ids"]
    texts = token_texts(tok, ids)
    assert "".join(texts) == tok.decode(ids, clean_up_tokenization_spaces=False)
    assert "".join(texts).startswith("[CLS] ")
    pieces = tok.convert_ids_to_tokens(ids)
    for piece, text in zip(pieces[1:], texts[1:], strict=True):  # a ## piece joins its word
        assert text.startswith(" ") != piece.startswith("##"), (piece, text)


def test_a_character_split_across_byte_tokens_shows_whole():
    tok = train_byte_bpe()
    text = "the cat 日本 sat 🎉"
    ids = tok(text)["input_ids"]
    assert len(ids) > len(text.split())  # the characters of several bytes are split
    texts = token_texts(tok, ids)
    assert "".join(texts) == text
    whole = [t.strip() for t in texts]
    assert {"日", "本", "🎉"} <= set(whole) and "\ufffd" not in "".join(texts)
