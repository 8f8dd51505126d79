"""A one-process checkpoint resumes under FSDP: every rank takes its shard of the whole tensors
and of the optimizer state (keyed by position there, by name under FSDP). Shown on a process
group of one rank (gloo, in this process): the same code path as N ranks, without starting
any. DCP checkpoints on 2 processes: tests/e2e/test_distributed.py."""

from __future__ import annotations

import socket

import pytest
import torch
import torch.distributed as dist
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from tunelab.core.errors import TunelabError
from tunelab.modeling.checkpoint import load_checkpoint, save_checkpoint
from tunelab.training.sharding import shard
from tunelab.training.step import make_optimizer


@pytest.fixture
def one_rank_group():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def lora(tiny_llama):
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tiny_llama)
    return get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))


def trained_once(model):
    _params, optimizer = make_optimizer(model, 1e-2, 0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    ids = torch.arange(1, 17).reshape(2, 8)
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    scheduler.step()
    return optimizer, scheduler


def test_a_one_process_checkpoint_loads_into_fsdp_shards(tiny_llama, tmp_path, one_rank_group):
    model = lora(tiny_llama)
    optimizer, scheduler = trained_once(model)
    save_checkpoint(tmp_path / "checkpoint", model, optimizer, scheduler, {"step": 1})

    sharded = lora(tiny_llama)
    assert (
        shard(sharded, torch.device("cpu"), 1, "fp32")["units"] == "2 LlamaDecoderLayer + the root"
    )
    params, again = make_optimizer(sharded, 1e-2, 0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(again, lambda step: 1.0)
    state = load_checkpoint(tmp_path / "checkpoint", sharded, again, schedule)
    assert state["step"] == 1 and schedule.last_epoch == 1

    trained = {n: p for n, p in model.named_parameters() if p.requires_grad}
    loaded = {n: p.full_tensor() for n, p in sharded.named_parameters() if p.requires_grad}
    assert trained.keys() == loaded.keys() and len(trained) == 8
    for name, value in trained.items():
        assert torch.equal(loaded[name], value.detach()), name
    for p, q in zip(optimizer.param_groups[0]["params"], params, strict=True):
        moments = (optimizer.state[p]["exp_avg"], again.state[q]["exp_avg"].full_tensor())
        assert torch.equal(*moments)


def test_a_checkpoint_of_another_trainable_set_is_refused_with_what_changed(tiny_llama, tmp_path):
    model = lora(tiny_llama)
    optimizer, scheduler = trained_once(model)
    save_checkpoint(tmp_path / "checkpoint", model, optimizer, scheduler, {"step": 1})
    fewer = lora(tiny_llama)
    next(p for n, p in fewer.named_parameters() if "lora_A" in n).requires_grad_(False)
    _params, again = make_optimizer(fewer, 1e-2, 0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(again, lambda step: 1.0)
    with pytest.raises(TunelabError, match="stepped 8 tensors and this run trains 7"):
        load_checkpoint(tmp_path / "checkpoint", fewer, again, schedule)


def test_what_torch_saved_is_read_onto_the_cpu(tiny_llama, tmp_path, monkeypatch):
    """Read where it was saved, every rank of a run resumed under torchrun put the whole
    optimizer state on `cuda:0`: each file torch.save wrote is read with map_location cpu
    (load_state_dict moves it to its parameter's device)."""
    model = lora(tiny_llama)
    optimizer, scheduler = trained_once(model)
    save_checkpoint(tmp_path / "checkpoint", model, optimizer, scheduler, {"step": 1})
    places, real = [], torch.load

    def load(*args, **kwargs):
        places.append(kwargs.get("map_location"))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "load", load)
    again = lora(tiny_llama)
    _params, optim = make_optimizer(again, 1e-2, 0.0)
    load_checkpoint(
        tmp_path / "checkpoint",
        again,
        optim,
        torch.optim.lr_scheduler.LambdaLR(optim, lambda step: 1.0),
    )
    assert places and set(places) == {"cpu"}


def test_a_checkpoint_is_fsynced_before_and_after_its_rename(tiny_llama, tmp_path, monkeypatch):
    """Every file (the tensors included) and the folder are fsynced before the swap, the
    parent folder after it, as the store does for a record."""
    from tunelab.modeling import checkpoint

    synced: list[tuple[str, bool]] = []
    real = checkpoint._fsync

    def record(path):
        synced.append((path.relative_to(tmp_path).as_posix(), (tmp_path / "checkpoint").exists()))
        real(path)

    monkeypatch.setattr(checkpoint, "_fsync", record)
    model = lora(tiny_llama)
    optimizer, scheduler = trained_once(model)
    save_checkpoint(tmp_path / "checkpoint", model, optimizer, scheduler, {"step": 1})
    before = {name for name, swapped in synced if not swapped}
    assert {
        "checkpoint.new/trainable.safetensors",
        "checkpoint.new/optimizer.pt",
        "checkpoint.new/state.json",
        "checkpoint.new",
    } <= before
    assert synced[-1] == (".", True)  # the rename, made durable
    assert sorted(p.name for p in (tmp_path / "checkpoint").iterdir()) == [
        "optimizer.pt",
        "state.json",
        "trainable.safetensors",
    ]


def test_keep_best_weights_go_into_a_several_process_checkpoint_and_come_back(tmp_path):
    """`training.keep: best` held its weights in memory only, so a run stopped after its best
    step and resumed kept its last step's. Under DCP (the several-process layout, read here
    by one process as a resume on one process reads it) they are the checkpoint's `best`."""
    import warnings
    from types import SimpleNamespace

    def small():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
        model[0].requires_grad_(False)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
        return model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)

    model, optimizer, scheduler = small()
    best = {n: p.detach() + 1 for n, p in model.named_parameters() if p.requires_grad}
    world = SimpleNamespace(distributed=True, main=True, rank=0, size=2, strategy="ddp")
    state = {"step": 4, "tokens": 8, "seconds": 1.0, "best": {"step": 2, "loss": 0.5}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dcp's notes on running without a process group
        save_checkpoint(tmp_path / "checkpoint", model, optimizer, scheduler, state, world, best)
        again, optimizer, scheduler = small()
        loaded = load_checkpoint(tmp_path / "checkpoint", again, optimizer, scheduler)
    assert loaded["best"] == {"step": 2, "loss": 0.5}
    assert sorted(loaded["best_weights"]) == sorted(best)
    assert all(torch.equal(loaded["best_weights"][n], best[n]) for n in best)
