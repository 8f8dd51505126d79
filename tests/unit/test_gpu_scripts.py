"""The GPU scripts a lent device runs, checked where CI can check them: every test
bench/gpu_tests.sh names is where it says (one moved test made pytest run none of the six)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_gpu_tests_sh_names_exists():
    script = (ROOT / "bench" / "gpu_tests.sh").read_text()
    listed = re.search(r"^TESTS=\((.*?)^\)", script, re.S | re.M).group(1).split()
    assert len(listed) >= 6
    for node in listed:
        path, name = node.split("::")
        assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.M), node
