"""A checkpoint keeps the generators of its own process: the CPU's and, on a GPU, the one of the
model's device alone. Reading every device's (`get_rng_state_all`) would open a CUDA context on
each GPU from every rank and, restored, give rank 0's untouched view of the other ranks'
generators. No GPU here: torch.cuda's state calls are recorded instead."""

from __future__ import annotations

import pytest
import torch

import tunelab.modeling.checkpoint as ckpt


@pytest.fixture
def on_cuda_1(monkeypatch):
    """The model's device reads as cuda:1; torch.cuda's generator calls are recorded."""
    calls = []
    monkeypatch.setattr(ckpt, "_device_of", lambda model: torch.device("cuda", 1))

    def get(device="cuda"):
        calls.append(("get", str(device)))
        return torch.tensor([7], dtype=torch.uint8)

    def set_(state, device="cuda"):
        calls.append(("set", str(device), int(state[0])))

    def every_device(*args):
        raise AssertionError("every device's generators were touched")

    monkeypatch.setattr(torch.cuda, "get_rng_state", get)
    monkeypatch.setattr(torch.cuda, "set_rng_state", set_)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", every_device)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", every_device)
    return calls


def test_only_the_models_own_device_generator_is_saved_and_restored(on_cuda_1):
    model = torch.nn.Linear(2, 2)
    rng = ckpt._rng(model)
    assert set(rng) == {"cpu", "cuda_device"} and on_cuda_1 == [("get", "cuda:1")]
    ckpt._set_rng(rng, model)
    assert on_cuda_1[-1] == ("set", "cuda:1", 7)


def test_a_checkpoint_with_every_devices_state_restores_this_devices_entry(on_cuda_1):
    cpu = torch.get_rng_state()
    listed = [torch.tensor([d], dtype=torch.uint8) for d in (10, 11, 12)]
    ckpt._set_rng({"cpu": cpu, "cuda": listed}, torch.nn.Linear(2, 2))
    assert on_cuda_1 == [("set", "cuda:1", 11)]


def test_on_a_cpu_only_the_cpu_generator_is_kept():
    model = torch.nn.Linear(2, 2)
    torch.manual_seed(3)
    rng = ckpt._rng(model)
    first = torch.rand(3)
    ckpt._set_rng(rng, model)
    assert set(rng) == {"cpu"} and torch.equal(torch.rand(3), first)
