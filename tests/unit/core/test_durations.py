import pytest

from tunelab.core.durations import clock, seconds


@pytest.mark.parametrize(
    ("x", "said"),
    [
        (0.025, "0.025 s"),
        (8.333, "8.33 s"),
        (99.94, "99.9 s"),
        (99.96, "100 s"),
        (999.6, "1,000 s"),  # it read "1e+03 s"
        (1200, "1,200 s"),
        (90720, "90,720 s (25.2 h)"),
    ],
)
def test_seconds_in_a_sentence(x, said):
    assert seconds(x) == said
    assert seconds(x, hours=False) == said.split(" (")[0]


@pytest.mark.parametrize(("x", "said"), [(5, "0:05"), (65.4, "1:05"), (7384, "2:03:04")])
def test_a_clock(x, said):
    assert clock(x) == said
