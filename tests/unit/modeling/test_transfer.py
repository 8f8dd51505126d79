"""A microbatch goes to a GPU through page-locked memory with `non_blocking=True`: a plain
`.to("cuda")` from pageable memory synchronizes the stream, so the host would wait for the
previous microbatch's backward before it could queue the next. No GPU here: the calls are
recorded."""

from __future__ import annotations

import torch

from tunelab.modeling.classifier_inputs import Encoded, collate
from tunelab.modeling.transfer import to_device


def test_on_a_cpu_the_batch_is_left_as_it_is():
    batch = collate([Encoded("a", [5, 6, 7], 1, False), Encoded("b", [8], 0, False)], 0, "cpu")
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["labels"].tolist() == [1, 0]


def test_to_a_gpu_every_tensor_is_pinned_and_copied_without_a_wait(monkeypatch):
    calls = []

    def pin(self):
        calls.append(("pin", tuple(self.shape)))
        return self

    def to(self, device, non_blocking=False):
        calls.append(("to", str(device), non_blocking))
        return self

    monkeypatch.setattr(torch.Tensor, "pin_memory", pin)
    monkeypatch.setattr(torch.Tensor, "to", to)
    out = to_device(
        {"input_ids": torch.zeros(2, 3), "labels": torch.zeros(2)}, torch.device("cuda")
    )
    assert set(out) == {"input_ids", "labels"}
    assert calls == [
        ("pin", (2, 3)),
        ("to", "cuda", True),
        ("pin", (2,)),
        ("to", "cuda", True),
    ]
