"""Nothing outside the lab is written: the libraries' caches a command fills go into the lab's
store, unless the user set where they go."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lab-format2"


def test_the_report_s_matplotlib_cache_goes_into_the_lab_not_the_home(tmp_path):
    """matplotlib wrote its font list into ~/.cache/matplotlib and made ~/.config/matplotlib."""
    lab = Path(shutil.copytree(FIXTURE, tmp_path / "lab"))
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CACHE_HOME")}
    env |= {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    command = [sys.executable, "-m", "tunelab.cli", "report", "--lab", str(lab), "--json"]
    subprocess.run(command, env=env, cwd=tmp_path, check=True, capture_output=True, timeout=300)
    assert list(home.rglob("*")) == []
    assert (lab / ".tunelab" / "cache" / "matplotlib").is_dir()


def test_a_cache_the_user_placed_stays_where_they_placed_it(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from tunelab.cli import LIBRARY_CACHES, _library_caches

    (tmp_path / ".tunelab").mkdir()
    for variable in LIBRARY_CACHES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mine"))
    _library_caches(SimpleNamespace(command="run", lab=tmp_path))
    assert os.environ["MPLCONFIGDIR"] == str(tmp_path / "mine")
    cache = tmp_path.resolve() / ".tunelab" / "cache"
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(cache / "torchinductor")
