from types import SimpleNamespace

import torch

from tunelab.training.levers import apply_threads, by_length, compiled


def test_by_length_orders_longest_first_only_when_asked():
    rows = [SimpleNamespace(input_ids=[0] * n) for n in (3, 9, 1, 5)]
    assert by_length([0, 1, 2, 3], rows, False) == [0, 1, 2, 3]
    assert by_length([0, 1, 2, 3], rows, True) == [1, 3, 0, 2]
    assert by_length([2, 0], rows, True) == [0, 2]  # only the given indices


def test_off_levers_leave_the_model_and_threads_alone():
    model = torch.nn.Linear(2, 2)
    assert compiled(model, False) is model
    assert apply_threads(None) == torch.get_num_threads()
