"""Classification with a causal LM: label scoring against generating and parsing, side by side.

Both paths use tunelab's own code on the same examples in one process: the lab renderer (chat
template), `evaluate.predict_by_scoring` (one prompt pass + one batched pass over every label's
tokens, KV cache shared) and `evaluate.generate` (batched greedy decoding with the KV cache)
followed by a parse that takes the first label named in the answer.

    .venv/bin/python bench/label_scoring.py --n 40
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from tunelab.core.sections import ClassificationTask
from tunelab.demo.assets import bbc_news, smollm2_gguf
from tunelab.modeling.gguf import materialize
from tunelab.modeling.render import Renderer, make_template
from tunelab.training.evaluate import generate, predict_by_scoring

LABELS = ["business", "entertainment", "politics", "sport", "tech"]
INSTRUCTION = "Which section of a news site does this article belong to? Answer with one of: " + (
    ", ".join(LABELS)
)


def articles(n: int) -> list[dict]:
    """The first n // 5 articles of each BBC topic, cut to 600 characters."""
    rows = []
    for folder, label in zip(
        ["business", "entertainment", "politics", "sports", "tech"], LABELS, strict=True
    ):
        for path in sorted((bbc_news() / folder).glob("*.txt"))[: n // 5]:
            text = path.read_bytes().decode("utf-8", errors="replace")[:600]
            rows.append({"id": path.name, "text": text, "label": label})
    return rows


def parse(answer: str) -> str | None:
    found = [(answer.lower().find(label), label) for label in LABELS if label in answer.lower()]
    return min(found)[1] if found else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--cache", type=Path, default=Path("bench/.cache"))
    args = parser.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    folder, _ = materialize(smollm2_gguf(), args.cache)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    template = make_template(tok, "chat", INSTRUCTION)
    renderer = Renderer(tok, "causal", ClassificationTask(), None, LABELS, 512, template=template)
    rows = articles(args.n)
    cpu = torch.device("cpu")

    start = time.perf_counter()
    scored = predict_by_scoring(model, renderer, rows, args.batch_size, cpu)
    scoring_s = time.perf_counter() - start

    start = time.perf_counter()
    prompts = [renderer.render(r, with_target=False).prompt_ids for r in rows]
    answers = generate(model, renderer, prompts, args.batch_size, args.max_new_tokens, cpu)
    generation_s = time.perf_counter() - start

    gold = [r["label"] for r in rows]
    acc_scoring = sum(p["predicted"] == g for p, g in zip(scored, gold, strict=True)) / len(rows)
    parsed = [parse(a) for a in answers]
    acc_gen = sum(p == g for p, g in zip(parsed, gold, strict=True)) / len(rows)
    unparsed = sum(p is None for p in parsed)
    print(
        f"{len(rows)} BBC articles, SmolLM2-135M-Instruct fp32, {torch.get_num_threads()} threads"
    )
    print(f"{'method':<34}{'seconds':>9}{'ex/s':>8}{'accuracy':>10}")
    print(
        f"{'label scoring (KV cache shared)':<34}{scoring_s:>9.1f}"
        f"{len(rows) / scoring_s:>8.2f}{acc_scoring:>10.1%}"
    )
    print(
        f"{'generate ' + str(args.max_new_tokens) + ' tokens + parse':<34}{generation_s:>9.1f}"
        f"{len(rows) / generation_s:>8.2f}{acc_gen:>10.1%}  ({unparsed} unparseable)"
    )
    print(f"scoring is {generation_s / scoring_s:.1f}x faster")


if __name__ == "__main__":
    main()
