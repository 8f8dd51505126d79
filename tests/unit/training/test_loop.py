import pytest
import torch
import torch.nn.functional as F

from tunelab.core.spec import TrainingSpec
from tunelab.modeling.classifier_inputs import Encoded, collate
from tunelab.training.loop import example_order, lr_factor, total_steps, train


def test_schedules_warm_up_then_decay():
    linear = lr_factor("linear", warmup=2, steps=10)
    assert [linear(0), linear(1)] == [0.5, 1.0]
    assert linear(2) == 1.0 and linear(9) == pytest.approx(1 / 8)
    cosine = lr_factor("cosine", warmup=0, steps=10)
    assert cosine(0) == 1.0 and cosine(5) == pytest.approx(0.5)
    assert lr_factor("constant", 0, 10)(7) == 1.0
    wsd = lr_factor("wsd", warmup=2, steps=10, decay_fraction=0.3)
    assert [wsd(s) for s in range(10)] == pytest.approx(
        [0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2 / 3, 1 / 3]
    )


def test_example_order_is_seeded_and_covers_each_epoch():
    a = list(example_order(10, steps=5, global_batch=4, seed=1))
    assert a == list(example_order(10, steps=5, global_batch=4, seed=1))
    assert a != list(example_order(10, steps=5, global_batch=4, seed=2))
    flat = [i for batch in a for i in batch]
    assert sorted(flat[:10]) == list(range(10))  # the first epoch sees every example once


def test_budget_in_epochs_becomes_steps():
    cfg = TrainingSpec(global_batch=8, microbatch=4, budget={"epochs": 2})
    assert total_steps(cfg, 20) == 5


class Bag(torch.nn.Module):
    """A tiny classifier with the transformers calling convention."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.EmbeddingBag(30, 8, mode="sum")
        self.head = torch.nn.Linear(8, 3)

    def forward(self, input_ids, attention_mask):
        logits = self.head(self.emb(input_ids, per_sample_weights=attention_mask.float()))
        return type("Out", (), {"logits": logits})()


def examples(n=12):
    g = torch.Generator().manual_seed(0)
    return [
        Encoded(str(i), torch.randint(1, 30, (3 + i % 5,), generator=g).tolist(), i % 3, False)
        for i in range(n)
    ]


def test_accumulated_gradient_equals_one_large_batch():
    data = examples(8)
    big = Bag()
    batch = collate(data, 0, torch.device("cpu"))
    F.cross_entropy(
        big(batch["input_ids"], batch["attention_mask"]).logits, batch["labels"]
    ).backward()
    acc = Bag()
    for chunk in (data[:2], data[2:5], data[5:]):  # unequal microbatches
        b = collate(chunk, 0, torch.device("cpu"))
        loss = F.cross_entropy(
            acc(b["input_ids"], b["attention_mask"]).logits, b["labels"], reduction="sum"
        ) / len(data)
        loss.backward()
    for p, q in zip(big.parameters(), acc.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad)


def test_training_lowers_the_loss_and_records_what_happened():
    model = Bag()
    cfg = TrainingSpec(
        lr=0.05, global_batch=6, microbatch=3, budget={"steps": 30}, max_grad_norm=1.0
    )
    out = train(model, examples(), cfg, torch.device("cpu"), pad_id=0)
    assert out["steps"] == 30 and out["accumulation"] == 2
    assert out["history"][-1]["loss"] < out["history"][0]["loss"]
    assert out["tokens"] == 15 * sum(len(e.input_ids) for e in examples())  # 30 x 6 / 12 epochs
    assert 0 < out["peak_memory_mb"] < 64 * 1024
    assert "accumulated global batch" in out["loss_normalisation"]


# Stored per-step losses (CPU, fp32, seed 0): a change to the loop, the step, the loss or the
# order of examples shows here as a number, not as a vague "the loss went down".
GOLDEN_BAG_LOSSES = [1.212885, 1.405433, 0.708404, 0.892096, 0.87811]


def test_golden_losses_of_a_tiny_classifier():
    cfg = TrainingSpec(
        lr=0.05, global_batch=6, microbatch=3, budget={"steps": 5}, max_grad_norm=1.0
    )
    out = train(Bag(), examples(), cfg, torch.device("cpu"), pad_id=0)
    losses = [h["loss"] for h in out["history"]]
    assert losses == pytest.approx(GOLDEN_BAG_LOSSES, rel=1e-4)


def test_a_runs_peak_memory_is_its_own_not_the_process_high(tmp_path):
    from tunelab.training.memory import peak_rss_mb, reset_peak

    if not reset_peak():
        pytest.skip("not checked: this kernel does not let a process reset its peak RSS")
    big = torch.ones(160 * 2**20)  # 640 MiB, resident
    high = peak_rss_mb()
    del big
    cfg = TrainingSpec(lr=0.05, global_batch=6, microbatch=3, budget={"steps": 2})
    out = train(Bag(), examples(), cfg, torch.device("cpu"), pad_id=0)
    assert out["peak_memory_mb"] < high - 400  # an earlier peak in this process is not counted
    assert "since the run's start" in out["peak_memory_source"]


def test_grouping_by_length_pads_less_for_the_same_losses(monkeypatch):
    """`training.group_by_length` orders each global batch longest first before cutting its
    microbatches: the same examples per step and the same summed loss, less padding."""
    import tunelab.training.loop as loop

    widths: dict[bool, list[int]] = {False: [], True: []}
    grouped = False

    def spy(micro, pad_id, device, packing=False):
        widths[grouped].append(max(len(e.input_ids) for e in micro) * len(micro))
        return collate(list(micro), pad_id, device)

    monkeypatch.setattr(loop, "make_batch", spy)
    runs = {}
    for grouped in (False, True):
        cfg = TrainingSpec(
            lr=0.05, global_batch=6, microbatch=3, budget={"steps": 5}, group_by_length=grouped
        )
        runs[grouped] = train(Bag(), examples(), cfg, torch.device("cpu"), pad_id=0)
    assert runs[True]["levers"]["group_by_length"] and not runs[False]["levers"]["group_by_length"]
    losses = {g: [h["loss"] for h in r["history"]] for g, r in runs.items()}
    assert losses[True] == pytest.approx(GOLDEN_BAG_LOSSES, rel=1e-4)
    assert losses[False] == pytest.approx(GOLDEN_BAG_LOSSES, rel=1e-4)
    assert runs[True]["tokens"] == runs[False]["tokens"]
    assert sum(widths[True]) < sum(widths[False])  # padded cells computed


def test_threads_and_precision_are_applied_and_recorded():
    before = torch.get_num_threads()
    try:
        cfg = TrainingSpec(global_batch=6, microbatch=3, budget={"steps": 1}, threads=1)
        out = train(Bag(), examples(), cfg, torch.device("cpu"), pad_id=0)
        assert out["levers"]["threads"] == 1 == torch.get_num_threads()
        assert out["precision"] == {"asked": "fp32", "used": "fp32"}
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
def test_a_compiled_model_trains_to_the_same_losses():
    """`training.compile`: steps through torch.compile's wrapper (inductor); the model itself
    is what trains (shared parameters) and what the caller keeps."""
    model = Bag()
    cfg = TrainingSpec(
        lr=0.05, global_batch=6, microbatch=3, budget={"steps": 5}, max_grad_norm=1.0, compile=True
    )
    out = train(model, examples(), cfg, torch.device("cpu"), pad_id=0)
    assert out["levers"]["compile"]
    assert [h["loss"] for h in out["history"]] == pytest.approx(GOLDEN_BAG_LOSSES, rel=1e-4)
    assert not hasattr(model, "_orig_mod")  # the caller's model is not the wrapper


def test_a_loss_that_stops_being_a_number_stops_the_run_at_that_step(tmp_path):
    """A learning rate of 1e6 took the loss to 3.3e6 and then NaN for every later step, and
    the run went on to a "completed" record and NaN weights, no divergence noted."""
    from tunelab.core.layout import HISTORY
    from tunelab.training.divergence import NonFiniteLoss

    cfg = TrainingSpec(
        lr=1e37, global_batch=6, microbatch=3, budget={"steps": 30}, max_grad_norm=None
    )
    with pytest.raises(NonFiniteLoss) as err:
        train(Bag(), examples(), cfg, torch.device("cpu"), pad_id=0, run_dir=tmp_path)
    said = str(err.value)
    assert "the training loss became nan at step" in said or "became inf at step" in said
    assert "try a smaller training.lr (now 1e+37), training.max_grad_norm (now None)" in said
    lines = (tmp_path / HISTORY).read_text().splitlines()
    step = int(said.split(" at step ")[1].split()[0].rstrip(":"))
    assert len(lines) == step < 30  # the step that failed is the history's last


def test_each_steps_history_holds_the_learning_rate_it_took():
    """The report's learning-rate curve is the history's `lr`: the rate each step took, warmup
    and decay included (no test read it from `train()`, so a constant one went unseen)."""
    cfg = TrainingSpec(
        lr=0.1,
        global_batch=4,
        microbatch=2,
        budget={"steps": 10},
        warmup_steps=2,
        schedule="wsd",
        decay_fraction=0.3,
    )
    out = train(Bag(), examples(), cfg, torch.device("cpu"), pad_id=0)
    factor = lr_factor("wsd", warmup=2, steps=10, decay_fraction=0.3)
    assert [h["lr"] for h in out["history"]] == pytest.approx([0.1 * factor(s) for s in range(10)])


def test_a_time_cap_ends_training_after_the_step_that_passes_it():
    """`training.budget.seconds`, the SPEC's time budget (hV F1): beside steps, it ends
    training at the first step that finishes past it, measured there, and says what it cut."""
    from tunelab.training.validate import Validation

    cut = TrainingSpec(lr=0.05, global_batch=6, microbatch=3, budget={"steps": 40, "seconds": 1e-9})
    v = Validation(examples(6), every=10, keep="last")
    out = train(Bag(), examples(), cut, torch.device("cpu"), pad_id=0, validation=v)
    assert out["steps"] == len(out["history"]) == 1 and out["examples_seen"] == 6
    assert [p["step"] for p in out["validation"]["points"]] == [1]  # the last step: measured
    assert out["time_cap"] | {"message": None} == {
        "seconds": 1e-9,
        "steps": 1,
        "of": 40,
        "cut": True,
        "message": None,
    }
    assert out["time_cap"]["message"].startswith(
        "training.budget.seconds 1e-09 ended training after step 1 of the 40 the schedule"
    )
    roomy = TrainingSpec(lr=0.05, global_batch=6, microbatch=3, budget={"steps": 5, "seconds": 1e6})
    whole = train(Bag(), examples(), roomy, torch.device("cpu"), pad_id=0)
    assert whole["steps"] == 5 and whole["time_cap"] == {
        "seconds": 1e6,
        "steps": 5,
        "of": 5,
        "cut": False,
    }
    with pytest.raises(ValueError, match="got none; seconds caps the time of any of them"):
        TrainingSpec(budget={"seconds": 60})
