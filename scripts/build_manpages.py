#!/usr/bin/env python3
"""Build the extraction demo's data: Unix manual pages -> {"name", "section", "summary"}.

Each row pairs the top of a rendered manual page (the model input) with fields taken from the
page's own structure (the target):

- ``name``: everything before the first " - " of the rendered NAME section, whitespace collapsed
  (mdoc pages render the dash as an en dash, U+2013, accepted too; a stray trailing comma is
  dropped).
  When a page documents several functions the whole comma list is kept, exactly as written
  (``printf, fprintf, dprintf, ...``): it is what the page says, and "the first name" would be
  a guess about which one the reader meant.
- ``section``: the section printed in the page header, ``printf(3)`` -> ``"3"``. It must agree
  with the file name's suffix (``printf.3.gz``); man-pages 6 subsections stay as printed
  (``size_t(3type)`` -> ``"3type"``).
- ``summary``: everything after the first " - " of the NAME section, whitespace collapsed.

Pages come from fixed Debian packages (see PACKAGES): every English section of ``manpages``
and ``manpages-dev``, plus the section 1 and 8 pages of Debian 12's Essential packages (present
on every Debian 12 system). Symlinked pages and ``.so`` redirect stubs are skipped (the page
they point to is read once under its own name), as are pages that fail to render, whose NAME
section does not parse, or whose NAME section runs over MAX_NAME_LINES rendered lines (long
macro lists such as stailq(3), whose targets would dwarf the rest); the counts are printed.

Rendering is ``man --nh --nj -l FILE`` (no hyphenation, no justification) with MANWIDTH=80 and
LC_ALL=C.UTF-8 in an otherwise empty environment; any overstrike or escape-sequence formatting
left is stripped, trailing spaces are dropped and runs of blank lines squeezed to one. The
model input is the first lines of that text (header line included) up to CUT_CHARS characters,
cut at a line boundary, and always extended to the end of the NAME section.

The shipped subset is drawn per major section (the leading digit), as even as the supply
allows, ranking pages within a section by a seeded hash of their id (so the draw is
deterministic and stable when pages are added or removed).

Needs a Debian 12 system with: apt-get install man-db manpages manpages-dev groff-base.

    python3 scripts/build_manpages.py    # writes src/tunelab/demo/data/manpages.jsonl
    python3 scripts/build_manpages.py --limit 0 --out /tmp/all.jsonl    # every parsed page
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "src" / "tunelab" / "demo" / "data" / "manpages.jsonl"

# package -> sections read from it ("*" = every /usr/share/man/manN directory; English only,
# since the locale directories /usr/share/man/<lang>/ are never matched).
PACKAGES: dict[str, str] = {
    "manpages": "*",
    "manpages-dev": "*",
    # Debian 12 Essential packages that ship section 1/8 pages.
    "base-passwd": "18",
    "bash": "18",
    "bsdutils": "18",
    "coreutils": "18",
    "dash": "18",
    "debianutils": "18",
    "diffutils": "18",
    "dpkg": "18",
    "findutils": "18",
    "grep": "18",
    "gzip": "18",
    "hostname": "18",
    "init-system-helpers": "18",
    "libc-bin": "18",
    "login": "18",
    "ncurses-bin": "18",
    "perl-base": "18",
    "sed": "18",
    "sysvinit-utils": "18",
    "tar": "18",
    "util-linux": "18",
}

MANWIDTH = 80
CUT_CHARS = 560  # model input: this many characters at most, cut at a line boundary
MAX_NAME_LINES = 2  # longer NAME sections (long lists of macros) are skipped: targets stay short
LIMIT = 600  # rows in the shipped subset
SEED = 0

PAGE_RE = re.compile(r"^/usr/share/man/man([1-9])/([^/]+)\.([1-9][a-z]*)\.gz$")
HEADER_RE = re.compile(r"\(([1-9][A-Za-z]*)\)\s*$")
HEADING_RE = re.compile(r"^\S")  # a section heading starts in column 0
OVERSTRIKE_RE = re.compile(r".\x08")
ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
WS_RE = re.compile(r"\s+")
DASH_RE = re.compile(r" [-\u2013\u2014] ")  # " - "; mdoc pages (.Nd) render an en dash


def render_env() -> dict[str, str]:
    """An empty, fixed environment: no MANOPT, MANROFFOPT, MAN_KEEP_FORMATTING, pager or locale."""
    return {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
        "MANWIDTH": str(MANWIDTH),
        "MANPAGER": "cat",
        "PAGER": "cat",
        "HOME": "/nonexistent",
    }


def dpkg_version(package: str) -> str:
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}\t${Version}", package],
        capture_output=True,
        text=True,
    )
    status, _, version = out.stdout.partition("\t")
    if out.returncode != 0 or not status.endswith(" installed"):
        sys.exit(f"package {package!r} is not installed (apt-get install {package})")
    return version


def package_pages(package: str, sections: str) -> list[str]:
    out = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True, check=True)
    pages = []
    for line in out.stdout.splitlines():
        m = PAGE_RE.match(line)
        if m and (sections == "*" or m.group(1) in sections):
            pages.append(line)
    return sorted(pages)


def is_so_stub(path: str) -> bool:
    """A page whose first request is `.so other/page` is a redirect, not a page."""
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            s = line.strip()
            if not s or s.startswith(('.\\"', "'\\\"")) or s == ".":
                continue
            return s.startswith(".so ") or s.startswith(".so\t")
    return False


def render(path: str) -> tuple[int, str, str]:
    out = subprocess.run(
        ["man", "--nh", "--nj", "-l", path],
        capture_output=True,
        env=render_env(),
        cwd="/",
    )
    return (
        out.returncode,
        out.stdout.decode("utf-8", "replace"),
        out.stderr.decode("utf-8", "replace"),
    )


def clean(text: str) -> list[str]:
    text = ANSI_RE.sub("", text)
    while "\x08" in text:
        new = OVERSTRIKE_RE.sub("", text)
        if new == text:
            text = text.replace("\x08", "")
            break
        text = new
    lines = [line.expandtabs().rstrip() for line in text.splitlines()]
    squeezed: list[str] = []
    for line in lines:
        if line == "" and (not squeezed or squeezed[-1] == ""):
            continue
        squeezed.append(line)
    while squeezed and squeezed[-1] == "":
        squeezed.pop()
    return squeezed


def name_block(lines: list[str]) -> tuple[int, int] | None:
    """(first, end) line indexes of the NAME section's body, or None."""
    for i, line in enumerate(lines[:12]):
        if line.strip() == "NAME" and HEADING_RE.match(line):
            j = i + 1
            while j < len(lines) and not HEADING_RE.match(lines[j]) and lines[j] != "":
                j += 1
            return (i + 1, j) if j > i + 1 else None
    return None


def build_row(package: str, version: str, path: str) -> tuple[str, dict | None]:
    """('ok', row) or (reason, None)."""
    m = PAGE_RE.match(path)
    assert m
    base, file_section = m.group(2), m.group(3)
    rc, out, _err = render(path)
    if rc != 0 or not out.strip():
        return "render failed", None
    lines = clean(out)
    hm = HEADER_RE.search(lines[0]) if lines else None
    if not hm:
        return "no section in header", None
    section = hm.group(1)
    if section.lower() != file_section.lower():
        return "header section differs from file name", None
    block = name_block(lines)
    if block is None:
        return "no NAME section", None
    first, end = block
    if end - first > MAX_NAME_LINES:
        return f"NAME section over {MAX_NAME_LINES} lines", None
    name_text = WS_RE.sub(" ", " ".join(lines[first:end])).strip()
    m_dash = DASH_RE.search(name_text)
    if not m_dash:
        return "NAME line has no ' - '", None
    name = name_text[: m_dash.start()].strip().rstrip(",").rstrip()
    summary = name_text[m_dash.end() :].strip()
    if not name or not summary:
        return "empty name or summary", None
    keep, size = 0, 0
    for k, line in enumerate(lines):
        size += len(line) + 1
        if size - 1 > CUT_CHARS and k >= end:
            break
        keep = k + 1
    while keep > end and lines[keep - 1] == "":
        keep -= 1
    text = "\n".join(lines[:keep])
    flat = WS_RE.sub(" ", text)
    if name not in flat or summary not in flat:
        return "target not found in text", None
    row = {
        "id": f"{base}.{file_section}",
        "text": text,
        "target": {"name": name, "section": section, "summary": summary},
        "source": f"{package} {version} {path}",
        "group": base,
    }
    return "ok", row


def rank(row_id: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{row_id}".encode()).hexdigest()


def select(rows: list[dict], limit: int, seed: int) -> list[dict]:
    """Even split across major sections (leading digit), water-filled; seeded order within."""
    if limit <= 0 or limit >= len(rows):
        return rows
    by_major: dict[str, list[dict]] = {}
    for row in rows:
        by_major.setdefault(row["target"]["section"][0], []).append(row)
    quota: dict[str, int] = {}
    left, open_ = limit, sorted(by_major, key=lambda s: (len(by_major[s]), s))
    while open_:
        share = left // len(open_)
        small = [s for s in open_ if len(by_major[s]) <= share]
        if not small:
            extra = left - share * len(open_)
            for i, s in enumerate(sorted(open_, key=lambda s: (-len(by_major[s]), s))):
                quota[s] = share + (1 if i < extra else 0)
            break
        for s in small:
            quota[s] = len(by_major[s])
            left -= quota[s]
            open_.remove(s)
    chosen = []
    for s, group in by_major.items():
        chosen += sorted(group, key=lambda r: rank(r["id"], seed))[: quota[s]]
    return sorted(chosen, key=lambda r: r["id"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--limit", type=int, default=LIMIT, help="rows to keep (0: all)")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 4)
    args = ap.parse_args()

    skips: Counter[str] = Counter()
    work: list[tuple[str, str, str]] = []
    for package, sections in PACKAGES.items():
        version = dpkg_version(package)
        for path in package_pages(package, sections):
            if os.path.islink(path):
                skips["symlink"] += 1
            elif not os.path.isfile(path):
                skips["missing file"] += 1
            elif is_so_stub(path):
                skips[".so stub"] += 1
            else:
                work.append((package, version, path))

    rows: list[dict] = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for (package, _v, path), (why, row) in zip(
            work, pool.map(lambda w: build_row(*w), work), strict=True
        ):
            if row is None:
                skips[why] += 1
                print(f"skip ({why}): {package} {path}", file=sys.stderr)
            else:
                rows.append(row)
    rows.sort(key=lambda r: r["id"])
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "duplicate ids"

    chosen = select(rows, args.limit, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8", newline="\n") as fh:
        for row in chosen:
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")

    def mix(rs: list[dict]) -> str:
        c = Counter(r["target"]["section"] for r in rs)
        return ", ".join(f"{s}: {c[s]}" for s in sorted(c))

    print(
        f"pages rendered: {len(work)}; skipped before rendering: "
        f"{sum(skips[k] for k in ('symlink', '.so stub', 'missing file'))}"
    )
    for why, n in sorted(skips.items()):
        print(f"  skipped {why}: {n}")
    print(f"parsed pages: {len(rows)} ({mix(rows)})")
    print(
        f"written: {len(chosen)} rows ({mix(chosen)}) -> {args.out} "
        f"({args.out.stat().st_size} bytes)"
    )
    pkgs = Counter(r["source"].split(" ")[0] for r in chosen)
    print("by package: " + ", ".join(f"{p}: {n}" for p, n in sorted(pkgs.items())))


if __name__ == "__main__":
    main()
