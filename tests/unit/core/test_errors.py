"""Running out of memory is the user's to fix, told apart by class (torch's or Python's), also
when a library wrapped it; any other error is not read as one."""

from __future__ import annotations

import torch

from tunelab.core.errors import OutOfMemory, TunelabError, out_of_memory


def test_torch_and_python_out_of_memory_become_a_user_error_that_says_what_to_lower():
    found = out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert isinstance(found, OutOfMemory) and isinstance(found, TunelabError)
    assert str(found).startswith("out of memory (CUDA out of memory. Tried to allocate 2.00 GiB)")
    assert "activation_checkpointing" in str(found)
    assert "(no detail)" in str(out_of_memory(MemoryError()))


def test_a_wrapped_out_of_memory_is_found_and_other_errors_are_not():
    try:
        try:
            raise torch.OutOfMemoryError("CUDA out of memory")
        except torch.OutOfMemoryError as inner:
            raise RuntimeError("while evaluating") from inner
    except RuntimeError as outer:
        assert out_of_memory(outer) is not None
    assert out_of_memory(RuntimeError("CUDA error: an illegal memory access")) is None
    assert out_of_memory(ValueError("out of memory")) is None  # words alone are not the class
