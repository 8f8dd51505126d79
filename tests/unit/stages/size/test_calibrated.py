"""The estimate calibrated on one measured step: the step's part scaled, the rest kept."""

import pytest

from tunelab.stages.size.estimate import calibrated

MIB = 2**20


def _estimate(step_mib: float) -> dict:
    fixed = {"framework": 400 * MIB, "weights": 100 * MIB, "optimizer_state": 50 * MIB}
    return {"components": fixed | {"gradients": 25 * MIB}, "peak_bytes": 550 * MIB + step_mib * MIB}


def test_the_measured_excess_scales_the_step_not_the_fixed_part():
    at, target = _estimate(100), _estimate(400)  # measured 120 MiB of step for 100 estimated
    out = calibrated(at, (550 + 120) * MIB, target)
    assert out["factor"] == pytest.approx(1.2)
    assert out["peak_bytes"] == pytest.approx((550 + 400 * 1.2) * MIB)


def test_a_measurement_below_the_estimate_never_lowers_it():
    at, target = _estimate(100), _estimate(400)
    out = calibrated(at, (550 + 80) * MIB, target)
    assert out["factor"] == 1.0 and out["peak_bytes"] == target["peak_bytes"]
