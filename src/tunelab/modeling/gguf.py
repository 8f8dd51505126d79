"""GGUF bases: dequantize a `.gguf` file once into a plain safetensors copy, cached by its sha256.

Some small models ship only as GGUF. transformers can read one
(`from_pretrained(folder, gguf_file=name)`), but what it returns is marked as a quantized model:
`save_pretrained` refuses it and training it is refused too. So tunelab never trains that object.
`materialize` loads the file once, strips the GGUF quantizer off the (already dense) model, saves
model + tokenizer with `save_pretrained` into ``cache_root/<sha256>/``, and every later call and
every later stage loads that plain copy like any local model.

Cache layout::

    cache_root/<sha256>/            float32 copy (``<sha256>-<dtype>/`` for another dtype)
      config.json, model.safetensors, generation_config.json, tokenizer files
      gguf_source.json              written last, atomically: the copy is complete

A folder without a valid ``gguf_source.json`` is incomplete and gets rebuilt. The copy is built
in a staging folder beside it and renamed into place, so a crash or a second process racing this
one never leaves a half-written folder under the final name.
"""

from __future__ import annotations

import functools
import json
import shutil
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import torch

from tunelab.core.digest import sha256_file
from tunelab.core.errors import TunelabError
from tunelab.core.store import atomic_write_json, now

GGUF_MAGIC = b"GGUF"
MARKER = "gguf_source.json"
MARKER_FORMAT = 1

# GGUF metadata value types -> struct format of the fixed-size ones (8 = string, 9 = array).
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?"}
_SCALAR |= {10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


class GGUFError(TunelabError):
    """A GGUF base cannot be used: missing, not GGUF, or an architecture transformers lacks."""


def is_gguf_path(path: str | Path) -> bool:
    """Whether a spec's base model names a `.gguf` file (by its suffix)."""
    return Path(path).suffix.lower() == ".gguf"


def check_gguf_file(path: Path) -> None:
    """Raise `GGUFError` unless `path` is an existing file that starts with the `GGUF` magic."""
    path = Path(path)
    if not path.exists():
        raise GGUFError(f"GGUF file not found: {path}")
    if not path.is_file():
        raise GGUFError(f"not a file: {path} (a GGUF base must name the .gguf file itself)")
    with path.open("rb") as fh:
        magic = fh.read(4)
    if magic != GGUF_MAGIC:
        raise GGUFError(
            f"{path} is not a GGUF file: it starts with {magic!r}, a GGUF file starts with "
            f"{GGUF_MAGIC!r}. Point model.path at a .gguf file, or at a folder saved with "
            "save_pretrained."
        )


def read_gguf_architecture(path: Path) -> str:
    """`general.architecture` from a GGUF header, read directly (no tensors, no `gguf` package)."""
    check_gguf_file(path)
    try:
        with Path(path).open("rb") as fh:
            fh.read(4)
            (version,) = struct.unpack("<I", _read(fh, 4))
            if version < 2:
                raise GGUFError(f"{path}: GGUF version {version} is too old (need 2 or newer)")
            _tensor_count, kv_count = struct.unpack("<QQ", _read(fh, 16))
            for _ in range(kv_count):
                key = _read_string(fh)
                (vtype,) = struct.unpack("<I", _read(fh, 4))
                if key == "general.architecture" and vtype == _STRING:
                    return _read_string(fh)
                _skip_value(fh, vtype)
    except (struct.error, UnicodeDecodeError, EOFError) as exc:
        raise GGUFError(f"{path}: the GGUF header is truncated or corrupt ({exc})") from exc
    raise GGUFError(f"{path}: the GGUF header has no general.architecture")


def supported_architectures() -> list[str]:
    """GGUF architectures the installed transformers says it can load (legacy + newer reader)."""
    names: set[str] = set()
    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

        names |= set(GGUF_SUPPORTED_ARCHITECTURES) - {"general", "tokenizer"}
    except ImportError:
        pass
    try:
        from transformers.integrations.gguf import GGUF_ARCHS

        names |= set(GGUF_ARCHS)
    except ImportError:
        pass
    return sorted(names)


def cache_folder(cache_root: Path, sha256: str, dtype: torch.dtype = torch.float32) -> Path:
    """Where the plain copy of the GGUF with this sha256 lives, in this dtype."""
    name = sha256 if dtype == torch.float32 else f"{sha256}-{_dtype_name(dtype)}"
    return Path(cache_root) / name


def read_marker(folder: Path, sha256: str, dtype: torch.dtype = torch.float32) -> dict | None:
    """The folder's `gguf_source.json` if it marks a complete copy of this GGUF, else None."""
    try:
        marker = json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    complete = (
        isinstance(marker, dict)
        and marker.get("sha256") == sha256
        and marker.get("dtype") == _dtype_name(dtype)
        and (Path(folder) / "config.json").is_file()
    )
    return marker if complete else None


def materialize(
    gguf_path: Path, cache_root: Path, dtype: torch.dtype = torch.float32
) -> tuple[Path, str]:
    """The folder of a plain (safetensors) copy of `gguf_path`, and the file's sha256.

    The first call dequantizes with transformers and saves model + tokenizer; later calls with the
    same file bytes find the marker and return at once.
    """
    gguf_path = Path(gguf_path)
    check_gguf_file(gguf_path)
    sha = sha256_file(gguf_path)
    folder = cache_folder(cache_root, sha, dtype)
    if read_marker(folder, sha, dtype) is not None:
        return folder, sha

    architecture = read_gguf_architecture(gguf_path)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
    try:
        model_class = _save_plain_copy(gguf_path, staging, dtype, architecture)
        atomic_write_json(
            staging / MARKER,
            {
                "format": MARKER_FORMAT,
                "file_name": gguf_path.name,
                "size": gguf_path.stat().st_size,
                "sha256": sha,
                "architecture": architecture,
                "model_class": model_class,
                "dtype": _dtype_name(dtype),
                "transformers": _version("transformers"),
                "gguf": _version("gguf"),
                "torch": torch.__version__,
                "created": now(),
            },
        )
        _move_into_place(staging, folder, sha, dtype)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder, sha


# --- the dequantize-and-save step ---------------------------------------------------------


def _save_plain_copy(gguf_path: Path, out: Path, dtype: torch.dtype, architecture: str) -> str:
    """Load the GGUF with transformers, make the model plain, save model + tokenizer to `out`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {"gguf_file": gguf_path.name, "local_files_only": True}
    try:
        with read_once():
            model = AutoModelForCausalLM.from_pretrained(
                gguf_path.parent, dtype=dtype, **kwargs, **_dequantize_config()
            )
            tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, **kwargs)
    except (ValueError, KeyError, NotImplementedError, ImportError, OSError) as exc:
        raise _load_error(gguf_path, architecture, exc) from exc
    _make_plain(model)
    model.save_pretrained(out, safe_serialization=True)  # the default; said for 4.x
    tokenizer.save_pretrained(out)
    return type(model).__name__


@contextmanager
def read_once() -> Iterator[None]:
    """Inside it, transformers reads a GGUF file's header once and maps its tensor names once.

    transformers (5.x) reads the header anew for the config, for the weights and for the
    tokenizer, and gguf's `GGUFReader` parses every metadata field in Python (about 4 s each
    for SmolLM2's 49k-token vocabulary on a 2-core CPU); it also builds gguf's tensor-name map
    once per module of the model (397 times for SmolLM2-135M, about 5 s). Both are pure: the
    reader is read-only, over a memory map, and the map depends only on its arguments. So
    inside this block the same reader serves every read of one file and the map is built once
    per arguments; the weights, config and tokenizer are the same objects' data as without it.
    Both names are looked up in `gguf` at each call (`from gguf import ...` inside
    transformers' functions), which is what makes the swap take effect; outside the block
    gguf is as it was."""
    import gguf

    real_reader, real_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: Any, mode: str = "r") -> Any:
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = real_reader(path, mode)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.cache(real_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = real_reader, real_map


def _dequantize_config() -> dict[str, Any]:
    """Ask for a fully dequantized model where transformers can keep GGUF blocks packed (>= 5.x)."""
    try:
        from transformers import GgufConfig
    except ImportError:
        return {}
    return {"quantization_config": GgufConfig(dequantize=True)}


def _make_plain(model: torch.nn.Module) -> None:
    """Strip the GGUF quantizer: its weights are dense already, but transformers still refuses to
    save (`hf_quantizer`, `quantization_config`) or train (`is_quantized`) the object."""
    for module in model.modules():
        config = getattr(module, "config", None)
        if config is not None:
            if hasattr(config, "quantization_config"):
                delattr(config, "quantization_config")
            if getattr(config, "_is_quantized", False):
                config._is_quantized = False
    model.hf_quantizer = None
    if not isinstance(getattr(type(model), "is_quantized", None), property):
        model.is_quantized = False
    if getattr(model, "quantization_method", None) is not None:
        model.quantization_method = None
    packed = sorted(name for name, p in model.named_parameters() if not torch.is_floating_point(p))
    if packed:
        raise GGUFError(
            f"transformers left {len(packed)} weights packed (e.g. {packed[0]}); "
            "cannot save a plain copy"
        )


def _load_error(gguf_path: Path, architecture: str, exc: Exception) -> GGUFError:
    import transformers

    supported = supported_architectures()
    version = transformers.__version__
    if isinstance(exc, ImportError):
        return GGUFError(f"cannot read {gguf_path.name}: {exc} (try `pip install gguf`)")
    if supported and _arch_alias(architecture) not in supported:
        return GGUFError(
            f"{gguf_path.name}: GGUF architecture {architecture!r} is not one transformers "
            f"{version} can load from GGUF. Supported: {', '.join(supported)}."
        )
    return GGUFError(
        f"transformers {version} could not load {gguf_path.name} "
        f"(architecture {architecture!r}): {exc}"
    )


def _arch_alias(architecture: str) -> str:
    """The name transformers' list uses for a llama.cpp architecture name."""
    aliases = {"qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe", "t5encoder": "t5"}
    return aliases.get(architecture, architecture.replace("-", "_"))


def _move_into_place(staging: Path, folder: Path, sha: str, dtype: torch.dtype) -> None:
    """Rename the finished copy to its final name; an incomplete folder there is replaced, a
    complete one (another process finished first) is kept."""
    if folder.exists() and read_marker(folder, sha, dtype) is None:
        shutil.rmtree(folder)
    try:
        staging.rename(folder)
    except OSError:
        if read_marker(folder, sha, dtype) is None:
            raise


# --- small helpers ------------------------------------------------------------------------


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _read(fh: BinaryIO, n: int) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise EOFError(f"wanted {n} bytes, got {len(data)}")
    return data


def _read_string(fh: BinaryIO) -> str:
    (length,) = struct.unpack("<Q", _read(fh, 8))
    return _read(fh, length).decode("utf-8")


def _skip_value(fh: BinaryIO, vtype: int) -> None:
    if vtype in _SCALAR:
        fh.seek(struct.calcsize(_SCALAR[vtype]), 1)
    elif vtype == _STRING:
        (length,) = struct.unpack("<Q", _read(fh, 8))
        fh.seek(length, 1)
    elif vtype == _ARRAY:
        item_type, count = struct.unpack("<IQ", _read(fh, 12))
        if item_type in _SCALAR:
            fh.seek(struct.calcsize(_SCALAR[item_type]) * count, 1)
        else:
            for _ in range(count):
                _skip_value(fh, item_type)
    else:
        raise EOFError(f"unknown metadata value type {vtype}")
