"""The prompt around an example's input text, as the model's template renders it: the
instruction and the input's place (a chat template's user turn, or a plain layout), split at
the input so the text alone can be cut to fit, and the token that ends an answer.

A prompt is tokenised whole, the text in its place, as a server tokenises the filled template
(llama.cpp, vLLM, `apply_chat_template(tokenize=True)`). Tokenised apart, the template and the
text can meet in other tokens (SmolLM2 reads the `\n\n` before the text as one token alone
and as two in the whole string), and a bundle would be served inputs it never trained on."""

from __future__ import annotations

from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from tunelab.core.errors import TunelabError

PLACEHOLDER = "\x00INPUT\x00"
PLAIN_INPUT, PLAIN_ANSWER = "\n\n### Input:\n", "\n\n### Answer:\n"


class RenderError(TunelabError):
    """The template cannot render with this tokenizer (e.g. chat asked, none shipped)."""


@dataclass(frozen=True)
class Template:
    """The prompt around the input text, as token ids, and the token that ends an answer."""

    prefix: list[int]
    suffix: list[int]
    end_id: int | None
    kind: str
    text: tuple[str, str]
    """The prefix and suffix as text: a prompt is `text[0] + input + text[1]`, tokenised whole."""
    bos: tuple[int, ...] = ()
    """The token put before that string (a plain template's BOS), as in `prefix`."""

    def fill(
        self, tokenizer: PreTrainedTokenizerBase, text: str, room: int, side: str = "right"
    ) -> Prompt:
        """The prompt with `text` in its place, tokenised whole, in at most `room` tokens: the
        text cut on `side`, in whole tokens of its own, until the prompt fits."""
        ids, _ = self._encode(tokenizer, text)
        if len(ids) <= room:
            return Prompt(ids, 0, None)
        alone = tokenizer(text, add_special_tokens=False, return_offsets_mapping=tokenizer.is_fast)
        pieces = len(alone["input_ids"])
        keep = min(pieces, room - len(self.prefix) - len(self.suffix))
        while keep >= 1:  # where the text meets the template a token can merge or split
            kept = _kept(tokenizer, text, alone, keep, side)
            ids, starts = self._encode(tokenizer, kept)
            if len(ids) <= room:
                at = len(self.text[0]) + (len(kept) if side == "right" else 0)
                return Prompt(ids, pieces - keep, self._token_at(ids, starts, at, side))
            keep -= 1
        raise TunelabError(
            f"the template's {len(self.prefix) + len(self.suffix)} tokens leave no room for "
            f"the input in {room}"
        )

    def stop_ids(self, tokenizer: PreTrainedTokenizerBase) -> list[int]:
        """The tokens generation stops at: the end-of-answer token and EOS."""
        return sorted({self.end_id, tokenizer.eos_token_id} - {None})

    def input_of(self, tokenizer: PreTrainedTokenizerBase, prompt_ids: list[int]) -> str:
        """The input text a filled prompt holds, as it was cut: the prompt decoded, the
        template's text taken off either end."""
        prompt = tokenizer.decode(prompt_ids[len(self.bos) :])
        before, after = self.text
        if not (prompt.startswith(before) and prompt.endswith(after)):
            raise TunelabError(
                "these ids are not a prompt of this template: decoded, they "
                f"do not begin and end with its text ({prompt[:60]!r}...)"
            )
        return prompt[len(before) : len(prompt) - len(after)]

    def _encode(self, tokenizer, text: str) -> tuple[list[int], list[int] | None]:
        """The filled prompt's ids, and where each of its tokens starts in the string (None
        from a tokenizer without offsets)."""
        out = tokenizer(
            self.text[0] + text + self.text[1],
            add_special_tokens=False,
            return_offsets_mapping=tokenizer.is_fast,
        )
        starts = [a for a, _ in out["offset_mapping"]] if tokenizer.is_fast else None
        return [*self.bos, *out["input_ids"]], starts

    def _token_at(self, ids: list[int], starts: list[int] | None, at: int, side: str) -> int:
        """The index in `ids` of the first token that starts at or after character `at`."""
        if starts is None:  # no offsets: where the template's own tokens put the seam
            return len(ids) - len(self.suffix) if side == "right" else len(self.prefix)
        return len(self.bos) + sum(1 for s in starts if s < at)


@dataclass(frozen=True)
class Prompt:
    """A filled prompt's ids, the input text's tokens cut to fit (counted on the text alone),
    and where it was cut (an index into `ids`; None when nothing was)."""

    ids: list[int]
    cut: int
    cut_at: int | None


def _kept(tokenizer, text: str, alone, keep: int, side: str) -> str:
    """The text's first (side right) or last `keep` tokens, as text."""
    pieces = alone["input_ids"]
    if "offset_mapping" not in alone:
        kept = pieces[:keep] if side == "right" else pieces[len(pieces) - keep :]
        return tokenizer.decode(kept)
    offsets = alone["offset_mapping"]
    return text[: offsets[keep - 1][1]] if side == "right" else text[offsets[-keep][0] :]


def make_template(tokenizer: PreTrainedTokenizerBase, kind: str, instruction: str) -> Template:
    """Split the rendered prompt at the input text, so the text alone can be cut to fit."""
    if kind == "chat":
        if not tokenizer.chat_template:
            raise RenderError(
                "model.template is `chat` but this tokenizer has no chat template; "
                "use `template: plain` or a model that ships one"
            )
        messages = [{"role": "user", "content": f"{instruction}\n\n{PLACEHOLDER}"}]
        rendered = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        prefix, suffix = _around_placeholder(rendered, "the user's message")
        bos: list[int] = []
    else:
        prefix, suffix = instruction + PLAIN_INPUT, PLAIN_ANSWER
        bos = [tokenizer.bos_token_id] if adds_bos(tokenizer) else []

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    return Template(
        bos + ids(prefix),
        ids(suffix),
        end_of_answer(tokenizer, kind),
        kind,
        (prefix, suffix),
        tuple(bos),
    )


def adds_bos(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Whether the tokenizer itself starts a text with its BOS token (a plain prompt then
    starts with it too, as the model was trained to read). Asked of the tokenizer, not of its
    `add_bos_token`: transformers 5 says False for one whose tokenizer.json's post-processor
    adds it (OPT, Mistral, Gemma), and those prompts had lost it without a word."""
    bos = tokenizer.bos_token_id
    if bos is None:
        return False
    plain = tokenizer("x", add_special_tokens=False)["input_ids"]
    full = tokenizer("x")["input_ids"]
    return bool(full) and full[0] == bos and full[1 : 1 + len(plain)] == plain


def special_ids(tokenizer: PreTrainedTokenizerBase) -> set[int]:
    """The tokenizer's special tokens: those it names (BOS, EOS, the additional ones) and
    those its tokenizer.json marks special without naming (a Gemma-style `<end_of_turn>`:
    missed, the answers of such a chat template were trained to end with EOS, a turn ending
    the template never writes)."""
    marked = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    return set(tokenizer.all_special_ids) | {i for i, t in marked.items() if t.special}


def _around_placeholder(rendered: str, what: str) -> tuple[str, str]:
    """What a chat template writes before and after a message's text, given as `PLACEHOLDER`;
    a template that cuts or drops that text is named, not crashed on."""
    if rendered.count(PLACEHOLDER) != 1:
        raise RenderError(
            f"the model's chat template does not write {what} as it is given (it cuts it, "
            "leaves it out or writes it twice), so tunelab cannot train on prompts and answers "
            "as that template renders them; mend the template (chat_template in the model's "
            "tokenizer_config.json, or its chat_template.jinja), or set model.template: plain"
        )
    before, after = rendered.split(PLACEHOLDER)
    return before, after


def end_of_answer(tokenizer: PreTrainedTokenizerBase, kind: str) -> int | None:
    """The token the model must learn to emit after an answer: the chat template's
    end-of-turn token when there is one, else EOS; None when the tokenizer has neither
    (then nothing teaches the model to stop, and `tunelab inspect` blocks training)."""
    if kind == "chat":
        turn = [{"role": "user", "content": "q"}, {"role": "assistant", "content": PLACEHOLDER}]
        rendered = tokenizer.apply_chat_template(turn, tokenize=False)
        after = _around_placeholder(rendered, "the assistant's answer")[1]
        first = tokenizer(after, add_special_tokens=False)["input_ids"][:1]
        if first and first[0] in special_ids(tokenizer):
            return first[0]
    return tokenizer.eos_token_id
