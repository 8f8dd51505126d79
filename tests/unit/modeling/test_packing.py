"""Packing documents for pretraining: the layout and boundaries are recorded, and with
`boundaries: mask` no document attends across its boundary (a perturbation test: changing
document A's tokens leaves document B's logits unchanged); with `none` it does."""

from __future__ import annotations

import pytest
import torch

from tunelab.core.scratch import Arch, Bpe
from tunelab.modeling.bpe import train_bpe
from tunelab.modeling.loss_positions import IGNORE
from tunelab.modeling.packing import collate_packed, pack, packing_record
from tunelab.modeling.scratch import build_scratch, scratch_config
from tunelab.training.step import forward, make_batch, summed_loss

TEXTS = ["the cat sat on the mat", "a dog ran in the park today", "birds sang at dawn"] * 4


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe(TEXTS, Bpe(vocab_size=280))


def rows(*texts: str, source: str = "prose") -> list[dict]:
    return [{"id": f"d{i}", "text": t, "source": source} for i, t in enumerate(texts)]


def test_documents_become_eos_led_segments_cut_at_the_sequence_length(tokenizer):
    docs = rows("the cat sat on the mat", "a dog ran")
    lengths = [len(tokenizer(d["text"], add_special_tokens=False)["input_ids"]) + 1 for d in docs]
    length = lengths[0] + 2  # the second document starts in the first sequence, runs on
    packed = pack(tokenizer, docs, length, "mask", tokenizer.pad_token_id)
    first, second = packed
    eos = tokenizer.eos_token_id
    assert first.input_ids[0] == eos and first.input_ids[lengths[0]] == eos
    assert first.documents == (("d0", 0, lengths[0]), ("d1", lengths[0], 2))
    assert second.documents == (("d1", 0, lengths[1] - 2),)
    # positions restart at each segment, and at the padding
    assert first.position_ids == [*range(lengths[0]), 0, 1]
    assert second.position_ids[: second.real] == list(range(lengths[1] - 2))
    assert second.position_ids[second.real :] == list(range(length - second.real))
    # a segment's first token and the padding are never targets
    assert first.labels[lengths[0]] == IGNORE and set(second.labels[second.real :]) == {IGNORE}
    record = packing_record(packed, length, "mask")
    assert record["documents"] == 2 and record["documents_split"] == 1
    assert record["tokens"] == sum(lengths) and record["sequences"] == 2
    # the text's bytes, a split document's shared out by its tokens
    assert record["bytes"] == len("the cat sat on the mat") + len("a dog ran")
    assert first.text_bytes == pytest.approx(len("the cat sat on the mat") + 9 * 2 / lengths[1])


def test_sources_are_packed_apart_so_a_mixture_can_weigh_them(tokenizer):
    packed = pack(
        tokenizer,
        rows("the cat sat", source="prose") + rows("print(i)", source="code"),
        16,
        "none",
        tokenizer.pad_token_id,
    )
    assert [p.source for p in packed] == ["prose", "code"]
    assert all(p.position_ids is None for p in packed)  # `none`: positions 0..L-1


def model(tokenizer, **options):
    arch = Arch(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, **options)
    special = {"pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 0}
    return build_scratch(scratch_config(arch, len(tokenizer), 64, special), 0, torch.float32)


def logits(net, tokenizer, texts: tuple[str, str], boundaries: str) -> tuple[torch.Tensor, int]:
    """The packed pair's logits, and where document B starts."""
    (seq,) = pack(tokenizer, rows(*texts), 64, boundaries, tokenizer.pad_token_id)
    batch = collate_packed([seq], torch.device("cpu"))
    with torch.no_grad():
        out = forward(net, batch)  # as the training step calls the model
    b_start, b_len = seq.documents[1][1:]
    return out.logits[0, b_start : b_start + b_len], b_len


ARCHS = {
    "llama": {},
    "gqa": {"num_key_value_heads": 2},
    "nope": {"rope": {"nope_layers": [0]}},
    "moe": {"moe": {"num_experts": 4}},
}


@pytest.mark.parametrize("arch", sorted(ARCHS))
@pytest.mark.parametrize(
    "doc_a", ["a dog ran in the park today", "birds sang"], ids=["same-length", "shorter"]
)
def test_with_mask_no_document_attends_across_its_boundary(tokenizer, doc_a, arch):
    net = model(tokenizer, **ARCHS[arch])
    b = "the cat sat on the mat"
    base, n = logits(net, tokenizer, ("birds sang at dawn today", b), "mask")
    perturbed, m = logits(net, tokenizer, (doc_a, b), "mask")
    assert n == m
    assert torch.allclose(base, perturbed, atol=1e-5)  # B never saw A


def test_without_the_mask_a_document_sees_the_one_before(tokenizer):
    net = model(tokenizer)
    b = "the cat sat on the mat"
    base, _ = logits(net, tokenizer, ("birds sang at dawn today", b), "none")
    perturbed, _ = logits(net, tokenizer, ("a dog ran in the park today", b), "none")
    assert not torch.allclose(base, perturbed, atol=1e-5)


def test_the_training_step_sees_the_block_diagonal_mask_too(tokenizer):
    """The loss of document B's tokens does not move when document A changes."""
    net = model(tokenizer)
    b = "the cat sat on the mat"

    def loss_of_b(a: str) -> float:
        (seq,) = pack(tokenizer, rows(a, b), 64, "mask", tokenizer.pad_token_id)
        start = seq.documents[1][1]
        only_b = [IGNORE] * start + seq.labels[start:]
        seq = type(seq)(**{**seq.__dict__, "labels": only_b})
        with torch.no_grad():
            return float(summed_loss(net, make_batch([seq], 1, torch.device("cpu"))))

    assert loss_of_b("birds sang at dawn") == pytest.approx(loss_of_b("a dog ran"), abs=1e-5)
