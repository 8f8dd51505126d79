"""The prompt as tunelab feeds it against the prompt as a server would build it, on one bundle.

A server fills the bundle's `template.json` prompt with the text and tokenises the whole
string. tunelab once tokenised the template's prefix, the input text and the suffix apart and
joined the ids, which can give other tokens at the seams: SmolLM2's byte-level BPE turns the
`\\n\\n` that ends the prefix into one token (`ĊĊ`) when tokenised alone and into two (`Ċ Ċ`)
inside the string. Since tunelab tokenises the filled prompt whole (`Template.fill`), the two
should not differ. This benchmark generates the bundle's validation answers both ways (greedy,
the lab's batch size and new tokens, tunelab's `generate`) and scores both with tunelab's
`score_outputs`, paired per page.

    .venv/bin/python bench/serve_prompt.py BUNDLE [--json out.json]

The bundle must lie in its lab (the validation rows are read from the lab's store).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def one_string_prompts(renderer, tokenizer, template: dict, rows: list[dict]) -> list[list[int]]:
    """Each prompt as a server builds it: the template's text with the page (cut as tunelab
    cut it) in the placeholder's place, tokenised as one string, after template.json's
    `bos_ids`."""
    prompts = []
    for row in rows:
        ids = renderer.render(row, with_target=False).prompt_ids
        page = renderer.template.input_of(tokenizer, ids)
        text = template["prompt"].replace(template["placeholder"], page)
        prompts.append(template["bos_ids"] + tokenizer(text, add_special_tokens=False)["input_ids"])
    return prompts


def compare(bundle: Path) -> dict:
    import torch

    from tunelab.core.lab import open_lab
    from tunelab.modeling.render import lab_renderer
    from tunelab.stages.export.load import lab_of, load_bundle
    from tunelab.tasks import score_outputs
    from tunelab.training.evaluate import generate

    model, tokenizer, info = load_bundle(bundle)
    lab = open_lab(lab_of(bundle) or sys.exit(f"{bundle} does not lie in a lab"), device="cpu")
    version = info["data_version"]
    renderer = lab_renderer(lab.spec, lab.path, info["labels"] or [], version)
    rows = lab.store.read_split(version, "validation")
    template = json.loads((bundle / "template.json").read_text())
    if "prompt" not in template:
        sys.exit(f"{bundle} has no filled prompt (a conversation or other bundle): nothing to do")
    ev = lab.spec.evaluation
    ways = {
        "tunelab": [renderer.render(r, with_target=False).prompt_ids for r in rows],
        "one_string": one_string_prompts(renderer, tokenizer, template, rows),
    }
    result: dict = {
        "bundle": str(bundle),
        "run": info["run"],
        "pages": len(rows),
        "prompts_that_differ": sum(a != b for a, b in zip(*ways.values(), strict=True)),
    }
    first = next((i for i, (a, b) in enumerate(zip(*ways.values(), strict=True)) if a != b), None)
    if first is not None:
        a, b = (ways[w][first] for w in ways)
        at = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
        result["example"] = {
            "page": rows[first]["id"],
            "token": at,
            **{w: tokenizer.convert_ids_to_tokens(ways[w][first][at : at + 3]) for w in ways},
        }
    per_page = {}
    for way, prompts in ways.items():
        started = time.perf_counter()
        with torch.inference_mode():
            outputs = generate(
                model, renderer, prompts, ev.batch_size, ev.max_new_tokens, torch.device("cpu")
            )
        predictions = [
            {"id": r["id"], "target": r["target"], "output": o}
            for r, o in zip(rows, outputs, strict=True)
        ]
        metrics = score_outputs(renderer.task, renderer.schema, predictions)
        per_page[way] = [_exact(renderer, p) for p in predictions]
        result[way] = {
            "exact_match": metrics["exact_match"],
            "json_valid": metrics["json_valid"],
            "seconds": round(time.perf_counter() - started, 1),
            "outputs": outputs,
        }
    pairs = list(zip(per_page["tunelab"], per_page["one_string"], strict=True))
    outputs = (result[w]["outputs"] for w in ways)
    result["same_output"] = sum(a == b for a, b in zip(*outputs, strict=True))
    result["only_tunelab_right"] = sum(a and not b for a, b in pairs)
    result["only_one_string_right"] = sum(b and not a for a, b in pairs)
    return result


def _exact(renderer, prediction: dict) -> bool:
    from tunelab.tasks import score_outputs

    return score_outputs(renderer.task, renderer.schema, [prediction])["exact_match"] == 1.0


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path, help="an exported bundle inside its lab")
    parser.add_argument("--json", type=Path, help="also write the whole result here")
    args = parser.parse_args(argv)
    result = compare(args.bundle.resolve())
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    n = result["pages"]
    print(f"{result['run']}: {result['prompts_that_differ']} of {n} prompts differ", end="")
    print(f" ({result.get('example')})" if result.get("example") else "")
    for way in ("tunelab", "one_string"):
        r = result[way]
        print(
            f"{way:>10}: exact match {100 * r['exact_match']:.1f}%, JSON valid "
            f"{100 * r['json_valid']:.1f}% ({r['seconds']} s)"
        )
    print(
        f"same output on {result['same_output']} of {n} pages; right only with tunelab's "
        f"prompt {result['only_tunelab_right']}, only with the one string "
        f"{result['only_one_string_right']}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
