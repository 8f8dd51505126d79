"""Each token's text as it reads in its place, for `tunelab inspect`.

A token decoded alone loses what joins it to its neighbours: WordPiece's `##o` continues a
word and a piece without `##` starts one after a space; SentencePiece's `▁` is a space that a
lone decode drops; a byte-level BPE splits a character of several bytes (`日`, an emoji)
across tokens, each of which alone decodes to `�`. Here a token's text is what it adds to the
decoded text of the few tokens before it, as a streaming detokenizer does; a token that ends
inside a character adds nothing, and the one that completes the character shows it whole (with
the space before it, if one came first). Joined, the texts give the decoded sequence.
"""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase

CONTEXT = 6
"""Tokens of context decoded before each token: enough for a word or a character to form."""
CUT = "\ufffd"


def token_texts(tokenizer: PreTrainedTokenizerBase, ids: list[int]) -> list[str]:
    """The text each of `ids` adds in its place (see the module docstring)."""
    out: list[str] = []
    first = 0  # the first token whose text is not shown yet (a character cut across tokens)
    for i in range(len(ids)):
        start = max(0, first - CONTEXT)
        before = _decode(tokenizer, ids[start:first])
        after = _decode(tokenizer, ids[start : i + 1])
        if after.endswith(CUT) and i + 1 < len(ids):  # inside a character: wait for its end
            out.append("")
            continue
        if not after.startswith(before):  # a decoder that rewrites what came before
            after, before = _decode(tokenizer, ids[first : i + 1]), ""
        out.append(after[len(before) :])
        first = i + 1
    return out


def _decode(tokenizer: PreTrainedTokenizerBase, ids: list[int]) -> str:
    return tokenizer.decode(ids, clean_up_tokenization_spaces=False) if ids else ""
