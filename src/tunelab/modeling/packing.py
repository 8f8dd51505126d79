"""Documents -> fixed-length training sequences for `task: pretrain`, boundaries recorded.

Each document becomes a segment `[EOS] + its tokens` (EOS doubles as the start-of-document
token, as in GPT-2). A source's segments are concatenated in split order and cut every
`sequence_length` tokens; a segment that does not fit runs on into the next sequence, and the
last sequence of a source is padded. Sequences never mix sources, so a data mixture
(`data.mixture`) samples sequences by source as it samples rows.

`boundaries` (task.boundaries):

- `mask`: position ids restart at 0 at every segment (and at the padding), and the model gets
  no 2-D attention mask, so transformers builds a block-diagonal causal mask from the restarts
  (`masking_utils.find_packed_sequence_indices`): no token attends across a boundary. A
  segment's first token is not a target: nothing inside its block precedes it.
- `none`: plain concatenation with positions 0..L-1 and a causal mask over the whole
  sequence: a document sees the ones before it, separated by EOS, and learns to predict the
  next document's EOS.

Padding is never a target. `Packed.documents` records each piece: (document id, start in the
sequence, tokens), so a run can say where every boundary was.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase

from tunelab.core.errors import TunelabError
from tunelab.modeling.loss_positions import IGNORE, target_index
from tunelab.modeling.transfer import to_device


@dataclass(frozen=True)
class Packed:
    """One fixed-length training sequence of one source."""

    id: str
    input_ids: list[int]
    labels: list[int]
    """The token at each position, or IGNORE where nothing is learned (padding; with
    `mask`, each segment's first token). Position 0 is never a target (the loss shifts)."""
    position_ids: list[int] | None
    """Restarting at each segment (`mask`), or None (`none`: 0..L-1)."""
    real: int
    """Tokens before the padding."""
    source: str
    documents: tuple[tuple[str, int, int], ...]
    text_bytes: float = 0.0
    """The UTF-8 bytes of text its tokens stand for (each document's bytes shared out over its
    pieces by their tokens): what a run reads of the text, which tokens alone do not say when
    tokenizers differ."""

    @property
    def loss_tokens(self) -> int:
        """Targets in the sequence (after the shift: a label at position p is predicted at p-1)."""
        return sum(label != IGNORE for label in self.labels[1:])


def segments(tokenizer: PreTrainedTokenizerBase, rows: list[dict]) -> list[tuple[str, list[int]]]:
    """Each row as `(id, [EOS] + its tokens)`."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise TunelabError("task pretrain needs a tokenizer with an EOS token between documents")
    ids = tokenizer([r["text"] for r in rows], add_special_tokens=False)["input_ids"]
    return [(r["id"], [eos, *doc]) for r, doc in zip(rows, ids, strict=True)]


def pack(
    tokenizer: PreTrainedTokenizerBase,
    rows: list[dict],
    sequence_length: int,
    boundaries: str,
    pad_id: int,
) -> list[Packed]:
    """The rows' documents packed source by source (see the module docstring)."""
    by_source: dict[str, list[dict]] = {}
    for row in rows:
        by_source.setdefault(row.get("source") or "data", []).append(row)
    out: list[Packed] = []
    for source, source_rows in by_source.items():
        sizes = {r["id"]: len(r["text"].encode("utf-8")) for r in source_rows}
        segs = segments(tokenizer, source_rows)
        out.extend(_pack_source(segs, source, sequence_length, boundaries, pad_id, sizes))
    return out


def _pack_source(
    segs: list[tuple[str, list[int]]],
    source: str,
    length: int,
    boundaries: str,
    pad_id: int,
    sizes: dict[str, int],
) -> list[Packed]:
    out: list[Packed] = []
    ids: list[int] = []
    labels: list[int] = []
    positions: list[int] = []
    docs: list[tuple[str, int, int]] = []
    text_bytes = 0.0  # of the sequence being filled

    def close() -> None:
        nonlocal text_bytes
        real = len(ids)
        pad = length - real
        pad_pos = list(range(pad))  # the padding is a block of its own
        out.append(
            Packed(
                id=f"{source}:{len(out)}",
                input_ids=ids + [pad_id] * pad,
                labels=labels + [IGNORE] * pad,
                position_ids=positions + pad_pos if boundaries == "mask" else None,
                real=real,
                source=source,
                documents=tuple(docs),
                text_bytes=text_bytes,
            )
        )
        for part in (ids, labels, positions, docs):
            part.clear()
        text_bytes = 0.0

    for doc_id, seg in segs:
        start = 0
        while start < len(seg):
            take = seg[start : start + length - len(ids)]
            docs.append((doc_id, len(ids), len(take)))
            text_bytes += sizes[doc_id] * len(take) / len(seg)
            first_label = IGNORE if boundaries == "mask" else take[0]
            labels.extend([first_label, *take[1:]])
            positions.extend(range(len(take)))
            ids.extend(take)
            start += len(take)
            if len(ids) == length:
                close()
    if ids:
        close()
    return out


def packing_record(packed: list[Packed], sequence_length: int, boundaries: str) -> dict:
    """What a run records of its packing: the layout, counts and the boundaries."""
    pieces = [d for p in packed for d in p.documents]
    documents = {d[0] for d in pieces}
    return {
        "sequence_length": sequence_length,
        "boundaries": boundaries,
        "sequences": len(packed),
        "documents": len(documents),
        "documents_split": len(pieces) - len(documents),
        "tokens": sum(p.real for p in packed),
        "padding": sum(len(p.input_ids) - p.real for p in packed),
        "targets": sum(p.loss_tokens for p in packed),
        "bytes": round(sum(p.text_bytes for p in packed)),
        "segment": "[EOS] + document tokens",
    }


def collate_packed(batch: list[Packed], device: torch.device) -> dict[str, torch.Tensor]:
    """A batch of packed sequences: `position_ids` with `mask` (and then the model is given no
    attention mask: see the module docstring), `attention_mask` 1 before the padding (with
    `none` it is passed to the model; always used to count tokens)."""
    input_ids = torch.tensor([p.input_ids for p in batch], dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    for row, p in enumerate(batch):
        attention[row, : p.real] = 1
    out = {
        "input_ids": input_ids,
        "attention_mask": attention,
        "labels": torch.tensor([p.labels for p in batch], dtype=torch.long),
    }
    if batch[0].position_ids is not None:
        out["position_ids"] = torch.tensor([p.position_ids for p in batch])
    return to_device(out | target_index(out["labels"]), device)
