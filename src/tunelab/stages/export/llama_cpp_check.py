"""`verify`'s llama.cpp check: the bundle's `gguf/model.gguf` answered where it will be served.

llama.cpp (the `llama_cpp` package, compiled from llama-cpp-python's source distribution by
`make gguf-runtime`) loads the file and answers the stored validation sample as the run's
`generate` did: each prompt given as the token ids tunelab's own renderer makes with the run's
tokenizer (never a string llama.cpp would tokenise again), greedy (temperature 0, top_k 1), one
prompt at a time from an empty cache, at most the run's `max_new_tokens`, stopping at the
template's end-of-answer token or EOS. An answer is llama.cpp's own detokenisation of what it
generated (what a llama.cpp user reads), stripped as tunelab strips its own; it agrees when it
equals the run's stored answer. How many agree, of how many, at the file's dtype, is returned.
Beside it, what a llama.cpp user who sends the prompt as text gets: each prompt's text (its ids
decoded, BOS aside) tokenised by llama.cpp (special tokens parsed, no BOS added), and how many
of those give the ids the run trained on. That count is reported, not judged: the answers are.

llama.cpp answers in a child process of its own, so that a crash inside it is a result, not
the end of `verify`. Its default kernels include "extra buffer types" (weights repacked for
AMX or other instruction sets), and on a CPU with AMX its AMX matrix multiply has crashed on a
q8_0 file (SIGSEGV; llama.cpp issue 20824). When the default crashes, the sample is answered
again with those buffer types off (`use_extra_bufts`, llama.cpp's plain CPU kernels), and the
result says that the default crashed on this CPU: a server that keeps the default would too.

Where `llama_cpp` cannot be imported, the file does not load in it, it crashes both ways, or
the task's sample is scored rather than generated, the result says "not checked" and why, never
that it passed.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import time
from pathlib import Path

NOT_BUILT = "llama.cpp runtime not built (make gguf-runtime)"
QUANTIZED_AGREE = 0.9
"""Share of the sample's answers llama.cpp must give as the run did from 8-bit blocks (q8_0),
or from any file when the run was not evaluated on a CPU in float32. From float32 or float16
weights of a run evaluated so, greedy decoding must give every answer (measured: the
extraction demo's 16 of 16 at f32 and f16, 15 of 16 at q8_0)."""


def llama_cpp_answers(bundle: Path, info: dict, sample: list[dict], path: Path, dtype: str) -> dict:
    """The sample answered by llama.cpp from `path` (written at `dtype`): `{"checked": True,
    "agreed", "n", "min_agree", "rule", "differ", ...}`, or `{"checked": False, "why"}`."""
    from tunelab.core.spec import validate_spec

    spec = validate_spec(info["spec"])
    if not spec.task.generative or spec.task.type == "pretrain":
        return _not_checked(
            f"a sample of task {spec.task.type} is scored, not generated; this check compares "
            "generated answers"
        )
    if not sample:
        return _not_checked("the bundle's validation sample is empty")
    try:
        import llama_cpp
    except Exception as err:  # not installed, or its compiled library does not load
        return _not_checked(f"{NOT_BUILT}: {type(err).__name__}: {err}")
    prompts, bare, texts, stop, tokenizer = _prompts(bundle, info, spec, sample)
    max_new = spec.evaluation.max_new_tokens
    start = time.perf_counter()
    runtime = f"llama-cpp-python {llama_cpp.__version__}"
    asked = (path, prompts, texts, stop, max_new)
    kernels, outcome = "default", _in_child(*asked, extra_bufts=True)
    if outcome[0] == "crashed":
        crash = outcome[1]
        kernels = f"extra buffer types off: the default {crash} on this CPU"
        outcome = _in_child(*asked, extra_bufts=False)
        if outcome[0] == "crashed":
            return _not_checked(
                f"llama.cpp ({runtime}) {crash} answering from {path.name}, and "
                f"{outcome[1]} again with its extra buffer types off"
            )
    if outcome[0] == "unloadable":
        return _not_checked(f"{path.name} does not load in llama.cpp ({runtime}): {outcome[1]}")
    found, tokenised = outcome[1], outcome[2]
    stored = [s["prediction"].get("output") for s in sample]
    differ = [  # the run's own decoding of llama.cpp's tokens tells a detokeniser difference
        {
            "id": s["row"]["id"],
            "run": want,
            "llama_cpp": text,
            "same_tokens": tokenizer.decode(ids, skip_special_tokens=True).strip() == want,
        }
        for s, (text, ids), want in zip(sample, found, stored, strict=True)
        if text != want
    ]
    share, rule = _rule(info, spec, dtype)
    return {
        "checked": True,
        "runtime": runtime,
        "kernels": kernels,
        "dtype": dtype,
        "agreed": len(sample) - len(differ),
        "n": len(sample),
        "min_agree": share,
        "rule": rule,
        "differ": [d["id"] for d in differ],
        "differences": differ[:5],
        "prompt_text": _as_text(sample, bare, tokenised),
        "generated_tokens": sum(len(ids) for _, ids in found),
        "seconds": round(time.perf_counter() - start, 2),
    }


def passes(found: dict) -> bool:
    """Whether llama.cpp's agreement meets its rule (a check that did not run never passes)."""
    return found["checked"] and found["agreed"] >= found["min_agree"] * found["n"]


def describe(found: dict) -> str:
    """The check in one clause, for `verify`'s detail."""
    if not found["checked"]:
        return f"llama.cpp: not checked: {found['why']}"
    return (
        f"llama.cpp ({found['runtime']}): {found['agreed']} of {found['n']} answers agree, greedy "
        f"from the same prompt token ids ({found['rule']} must)"
        + (f"; differ: {found['differ'][:5]}" if found["differ"] else "")
        + _text_clause(found.get("prompt_text"))
        + (f"; kernels: {found['kernels']}" if found.get("kernels", "default") != "default" else "")
    )


def _rule(info: dict, spec, dtype: str) -> tuple[float, str]:
    """The share of answers llama.cpp must give, and the rule in words."""
    evaluated = ((info.get("environment") or {}).get("device") or {}).get("type")
    if dtype == "q8_0":
        return QUANTIZED_AGREE, f"{QUANTIZED_AGREE:.0%} of them at q8_0"
    if evaluated == "cpu" and spec.model.dtype == "float32":
        return 1.0, f"every answer at {dtype}"
    return QUANTIZED_AGREE, (
        f"{QUANTIZED_AGREE:.0%} of them: the run was evaluated on {evaluated} in "
        f"{spec.model.dtype}, llama.cpp runs on the CPU"
    )


def _not_checked(why: str) -> dict:
    return {"checked": False, "why": why}


def _as_text(sample: list[dict], bare: list, tokenised: list) -> dict:
    """How many prompts llama.cpp tokenises, from their text, to the ids the run trained on
    (BOS aside)."""
    differ = [s["row"]["id"] for s, b, ids in zip(sample, bare, tokenised, strict=True) if b != ids]
    return {"same": len(sample) - len(differ), "n": len(sample), "differ": differ[:5]}


def _text_clause(found: dict | None) -> str:
    if not found:
        return ""
    return (
        f"; sent as text, {found['same']} of {found['n']} prompts tokenise in llama.cpp to the "
        "ids trained on" + (f" (differ: {found['differ']})" if found["differ"] else "")
    )


def _prompts(bundle: Path, info: dict, spec, sample: list[dict]):
    """The sample's prompts as the run's renderer tokenises them; the same without the BOS
    their string does not hold, and as text (decoded); the ids `generate` stops at; and the
    run's tokenizer."""
    from transformers import AutoTokenizer

    from tunelab.modeling.render import make_renderer

    tokenizer = AutoTokenizer.from_pretrained(bundle)
    renderer = make_renderer(spec, tokenizer, info["labels"], bundle)
    prompts = [renderer.render(s["row"], with_target=False).prompt_ids for s in sample]
    bos = list(renderer.template.bos)
    bare = [p[len(bos) :] if bos and p[: len(bos)] == bos else p for p in prompts]
    texts = [tokenizer.decode(b, clean_up_tokenization_spaces=False) for b in bare]
    stop = set(renderer.template.stop_ids(tokenizer))
    return prompts, bare, texts, stop, tokenizer


def _in_child(
    path: Path,
    prompts: list[list[int]],
    texts: list[str],
    stop: set[int],
    max_new: int,
    extra_bufts: bool,
) -> tuple[str, object]:
    """`_answer` for every prompt in a fresh process, and each prompt's text tokenised:
    `("answered", [(text, ids), ...], [prompt ids, ...])`, `("unloadable", llama.cpp's
    error)` or `("crashed", how it ended)`."""
    context = multiprocessing.get_context("spawn")  # nothing of this process's state
    receive, send = context.Pipe(duplex=False)
    n_ctx = max(len(p) for p in prompts) + max_new + 1
    args = (send, str(path), prompts, texts, sorted(stop), max_new, n_ctx, extra_bufts)
    child = context.Process(target=_answer_all, args=args, daemon=True)
    child.start()
    send.close()  # the child holds the only sending end: its death ends the wait
    try:
        outcome = receive.recv()
    except EOFError:
        outcome = None
    child.join()
    if outcome is None:
        code = child.exitcode or 0
        how = signal.Signals(-code).name if code < 0 else f"exit code {code}"
        return "crashed", f"crashed ({how})"
    return outcome


def _answer_all(
    send, path: str, prompts, texts, stop, max_new: int, n_ctx: int, extra: bool
) -> None:
    """The child: load the file (with or without llama.cpp's extra buffer types), answer
    every prompt, tokenise every prompt's text, send the outcome."""
    import llama_cpp
    import llama_cpp.llama_cpp as low

    if not extra:  # llama_cpp.Llama takes no argument for it: set it in the defaults it reads
        defaults = low.llama_model_default_params

        def params():
            found = defaults()
            found.use_extra_bufts = False
            return found

        low.llama_model_default_params = params
    try:
        llm = _load(llama_cpp, Path(path), n_ctx)
    except Exception as err:
        send.send(("unloadable", str(err)))
        return
    found = [_answer(llm, p, set(stop), max_new) for p in prompts]
    tokenised = [_tokenize(llm, t) for t in texts]
    llm.close()
    send.send(("answered", found, tokenised))


def _load(llama_cpp, path: Path, n_ctx: int):
    """The file in llama.cpp on the CPU, its log kept off stdout and stderr; a failure to
    load raises with llama.cpp's own last warning and error lines."""
    errors: list[str] = []

    @llama_cpp.llama_log_callback
    def collect(level: int, text: bytes, _user) -> None:
        if level in (3, 4):  # ggml.h: GGML_LOG_LEVEL_WARN, GGML_LOG_LEVEL_ERROR
            errors.append(text.decode("utf-8", "replace").strip())

    llama_cpp.llama_log_set(collect, ctypes.c_void_p(0))
    try:
        return llama_cpp.Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_batch=n_ctx,
            n_gpu_layers=0,
            n_threads=min(8, _cores()),
            seed=0,
            verbose=False,
        )
    except Exception as err:
        raise RuntimeError("; ".join([str(err), *errors[-3:]])) from None
    finally:
        from llama_cpp._logger import llama_log_callback

        llama_cpp.llama_log_set(llama_log_callback, ctypes.c_void_p(0))


def _answer(llm, prompt: list[int], stop: set[int], max_new: int) -> tuple[str, list[int]]:
    """Greedy decoding of `prompt` from an empty cache; the answer's text and token ids (the
    stop token, when reached, kept among the ids and dropped from the text as a special token,
    as tunelab's `generate` does)."""
    llm.reset()
    ids: list[int] = []
    for token in llm.generate(prompt, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, reset=True):
        ids.append(token)
        if token in stop or len(ids) >= max_new:
            break
    text = llm.detokenize(ids, special=False).decode("utf-8", "replace").strip()
    return text, ids


def _tokenize(llm, text: str) -> list[int] | None:
    """The text as llama.cpp tokenises it (special tokens parsed, no BOS added); None where it
    cannot, which counts as a difference, never as the answers' failure."""
    try:
        return llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
    except Exception:  # llama-cpp-python raises RuntimeError where llama_tokenize fails
        return None


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
