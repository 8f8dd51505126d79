"""A bundle's own record, `tunelab.json`, read before anything loads: a damaged or foreign one
is the user's to mend (exit 2, the file named), not an internal error."""

import json
import os
import subprocess
import sys

import pytest

from tunelab.cli import main
from tunelab.core.errors import TunelabError
from tunelab.stages.export.load import read_bundle


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"run": "r002-lora", "base_', "the bundle was damaged"),  # cut short
        ('{"run": "r002-lora"}', "no base_model record"),  # another tool's file
        ("[1, 2]", "no base_model record"),
    ],
)
def test_a_damaged_or_foreign_record_is_named_with_what_to_do(tmp_path, capsys, text, said):
    (tmp_path / "tunelab.json").write_text(text)
    with pytest.raises(TunelabError) as raised:
        read_bundle(tmp_path)
    message = str(raised.value)
    assert str(tmp_path / "tunelab.json") in message and said in message
    assert "tunelab export" in message
    assert main(["verify", str(tmp_path), "--json"]) == 2  # it was exit 1, "internal error"
    error = json.loads(capsys.readouterr().out)
    assert error["internal"] is False and said in error["error"]


def test_a_verify_process_killed_says_by_what(tmp_path, monkeypatch):
    """It read 'the verify process exited -9 without a result', and nothing on what to do."""
    import subprocess

    from tunelab.stages.export import verify

    (tmp_path / "tunelab.json").write_text('{"base_model": {"path": "m"}}')
    killed = subprocess.CompletedProcess([], -9, stdout="", stderr="loading…")
    monkeypatch.setattr(verify, "run_child", lambda *a, **k: killed)
    with pytest.raises(RuntimeError) as raised:
        verify.verify_bundle(tmp_path)
    assert str(raised.value).startswith(
        "the verify process was killed by SIGKILL (most often the out-of-memory killer"
    )


def test_a_bundle_of_an_encoder_decoder_says_its_predictions_do_not_stand(tmp_path):
    """A bundle an older tunelab made of BART (loaded as a causal LM, its encoder dropped)
    verified its base and load, then read only "0 of 6 reproduced"."""
    import numpy as np
    from safetensors.numpy import save_file

    from tunelab.core.spec import ModelSpec
    from tunelab.modeling.identity import identity
    from tunelab.stages.export.load import check_base

    base = tmp_path / "bart"
    base.mkdir()
    config = {"model_type": "bart", "is_encoder_decoder": True}
    (base / "config.json").write_text(json.dumps(config))
    save_file({"w": np.zeros(2, "f4")}, str(base / "model.safetensors"))
    recorded = identity(ModelSpec(path=str(base)), tmp_path)
    info = {"base_model": recorded, "spec": {"model": {"path": str(base)}}}
    with pytest.raises(TunelabError, match=r"is an encoder-decoder model .* do not stand"):
        check_base(info, base)


TOKENIZATION = """\
from transformers import PreTrainedTokenizerFast


class TinyRemoteTokenizer(PreTrainedTokenizerFast):
    pass
"""


def test_a_bundle_s_own_tokenizer_code_runs_only_as_the_run_allowed_it(
    tiny_bert, tmp_path, monkeypatch
):
    """A trust_remote_code base's tokenizer was loaded without trust_remote_code, so verify
    failed as an internal error; it must not run code a sender changed either."""
    import shutil
    import sys

    import transformers.dynamic_module_utils as dynamic

    from tunelab.core.digest import sha256_file
    from tunelab.modeling.safety import use_modules_cache
    from tunelab.stages.export.load import _tokenizer

    monkeypatch.setattr(dynamic, "HF_MODULES_CACHE", dynamic.HF_MODULES_CACHE)
    monkeypatch.setattr(sys, "path", list(sys.path))
    use_modules_cache(tmp_path / "modules")  # as load_bundle does: not the user's home

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_bert / name, bundle / name)
    code = bundle / "tokenization_tiny_remote.py"
    code.write_text(TOKENIZATION)
    config = json.loads((bundle / "tokenizer_config.json").read_text())
    remote = [None, "tokenization_tiny_remote.TinyRemoteTokenizer"]
    config |= {"auto_map": {"AutoTokenizer": remote}}
    (bundle / "tokenizer_config.json").write_text(json.dumps(config))
    allowed = {"files": {code.name: sha256_file(code)}}
    info = {"spec": {"model": {"trust_remote_code": True}}, "base_model": {"remote_code": allowed}}
    assert type(_tokenizer(bundle, info)).__name__ == "TinyRemoteTokenizer"
    config["auto_map"] = {
        "AutoTokenizer": remote[1]
    }  # as the tokenizer's save_pretrained writes it
    (bundle / "tokenizer_config.json").write_text(json.dumps(config))
    assert type(_tokenizer(bundle, info)).__name__ == "TinyRemoteTokenizer"
    code.write_text(TOKENIZATION + "print('another')\n")
    with pytest.raises(TunelabError, match="Python code the run did not allow"):
        _tokenizer(bundle, info)


def test_load_bundle_in_a_user_s_process_says_nothing_of_the_head_it_replaces(exported):
    """In a user's own Python, transformers' load report called the base's head "reinit due
    to size mismatch" (the bundle's trained head replaces it), with its progress bar: off while
    the bundle loads, and the user's own logging settings put back after."""
    _, bundle = exported
    script = (
        "import tunelab\n"
        "from transformers.utils import logging\n"
        f"tunelab.load_bundle(r'{bundle}')\n"
        "print(logging.get_verbosity(), logging.is_progress_bar_enabled())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRANSFORMERS_", "TQDM"))}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["30", "True"]  # warning level, bars on: as they were
    assert "LOAD REPORT" not in done.stderr and "Loading weights" not in done.stderr
