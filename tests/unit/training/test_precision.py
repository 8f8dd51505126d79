"""`training.precision: auto`: bf16 only on native units and a measured win, with the reason."""

from __future__ import annotations

import pytest
import torch

from tunelab.training import precision

CPU = torch.device("cpu")


def test_native_bf16_is_read_from_the_cpu_flags(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor : 0\nflags : fpu sse2 avx512f avx512_bf16\n")
    assert precision.cpu_flags(info) >= {"avx512_bf16", "sse2"}
    assert precision.native_bf16(CPU, {"avx512_bf16"}) == (True, "the CPU has avx512_bf16")
    native, why = precision.native_bf16(CPU, {"avx2"})
    assert not native and "emulated" in why
    assert precision.cpu_flags(tmp_path / "absent") == set()


@pytest.mark.parametrize(
    ("flags", "bf16", "choice", "words"),
    [
        ({"amx_bf16"}, 300.0, "bf16", "2.00x fp32's"),
        ({"amx_bf16"}, 165.0, "fp32", "only 1.10x"),
        ({"avx512_bf16"}, 0.7, "fp32", "only 0.0047x"),  # oneDNN's reference kernels
        (set(), 900.0, "fp32", "emulated"),  # never on emulated bf16, whatever a matmul says
    ],
)
def test_auto_chooses_bf16_only_where_native_and_faster(monkeypatch, flags, bf16, choice, words):
    speeds = {torch.float32: 150.0, torch.bfloat16: bf16}
    monkeypatch.setattr(precision, "matmul_gflops", lambda device, dtype: speeds[dtype])
    found = precision.measure(CPU, flags)
    assert found["choice"] == choice and words in found["reason"]
    assert found["fp32_gflops"] == 150.0
    # emulated bf16 is never chosen, so its slow matmul is not run
    assert found["bf16_gflops"] == (bf16 if flags else None)
    assert found["bf16_speedup"] == (float(f"{bf16 / 150.0:.3g}") if flags else None)


def test_a_slow_matmul_stops_its_repeats_at_the_budget(monkeypatch):
    ticks = iter(range(0, 100, 2))  # every timed matmul takes 2 s
    monkeypatch.setattr(precision.time, "perf_counter", lambda: next(ticks))
    assert precision.matmul_gflops(CPU, torch.float32, side=8, budget_s=0.5) == 2 * 8**3 / 2e9
    assert next(ticks) == 4  # one timed run (its start and stop read the clock), not five


def test_an_explicit_precision_is_kept_and_auto_is_resolved_on_this_machine():
    assert precision.resolve("fp32", CPU) == ("fp32", {"asked": "fp32", "used": "fp32"})
    used, record = precision.resolve("auto", CPU)
    assert used in ("fp32", "bf16") and record["asked"] == "auto" and record["used"] == used
    assert record["fp32_gflops"] > 0 and record["reason"]
    assert record["bf16_gflops"] > 0 if record["native_bf16"] else record["bf16_gflops"] is None


def test_auto_keeps_the_labs_choice_on_this_machine_and_measures_on_another(monkeypatch):
    timed = []

    def matmul(device, dtype):
        timed.append(dtype)
        return {torch.float32: 150.0, torch.bfloat16: 170.0}[dtype]

    monkeypatch.setattr(precision, "matmul_gflops", matmul)
    here = precision.machine(CPU)
    assert here["device"] == "cpu" and here["torch"] == torch.__version__
    first = {"asked": "auto", "used": "bf16", "reason": "measured then", "machine": here}
    elsewhere = first | {"used": "fp32", "machine": here | {"cpu": "another CPU"}}
    earlier = [("r004-seed1", elsewhere), ("r002-lora", first)]  # newest first
    used, record = precision.resolve("auto", CPU, earlier)
    assert (used, record["kept_from"], timed) == ("bf16", "r002-lora", [])  # nothing timed
    chain = [("r005", record), ("r002-lora", first)]  # a kept choice names where it was made
    assert precision.resolve("auto", CPU, chain)[1]["kept_from"] == "r002-lora"
    used, record = precision.resolve("auto", CPU, [("r004-seed1", elsewhere)])
    assert timed and "kept_from" not in record and record["machine"] == here
    assert precision.resolve("fp32", CPU, earlier)[0] == "fp32"  # asked, not auto: as asked
