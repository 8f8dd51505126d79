"""The token lengths `size` measures at, said as `inspect` says them."""

from types import SimpleNamespace

from tunelab.stages.inspect.lab import _percentiles
from tunelab.stages.size.lengths import measured_lengths


def test_inspect_and_size_give_one_p50_and_p95_of_the_same_examples():
    """inspect cut its percentiles down and size rounded them up: one lab's p95 read 270 in
    one and 271 in the other."""
    lengths = [100 + 3 * i for i in range(57)]  # p50 184, p95 259.6
    examples = [SimpleNamespace(input_ids=[0] * n, loss_tokens=0) for n in lengths]
    sized = measured_lengths(examples, None, 512)["seq_len"]
    shown = _percentiles(lengths)
    assert (shown["p50"], shown["p95"]) == (sized["p50"], sized["p95"]) == (184, 260)
