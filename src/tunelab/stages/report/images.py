"""The report's contact sheets: what `tunelab inspect` drew of an image lab, on the page.

`inspect` writes one PNG per split and category under `.tunelab/inspect/<version>/`
(`stages.inspect.images`), and one of the same images after the model's processor
(`<split>-<category>-model.png`, `stages.inspect.pixels`); the page embeds those of the
current data version as data URIs, so it stays one file that opens offline. A text lab has
none, and the page shows nothing.
"""

from __future__ import annotations

import base64

from tunelab.core.layout import INSPECT
from tunelab.core.store import Store

MODEL_VIEW = "-model"


def contact_sheets(store: Store, version: str | None) -> list[dict]:
    """Each sheet of `version`: its split, its file's category part, and the PNG as a data
    URI; in file-name order."""
    if version is None:
        return []
    folder = store.path(INSPECT, version)
    out = []
    for path in sorted(folder.glob("*.png")) if folder.is_dir() else []:
        split, _, category = path.stem.partition("-")
        if category.endswith(MODEL_VIEW):  # `inspect.pixels`: after the model's processor
            category = category.removesuffix(MODEL_VIEW) + ", as the model receives it"
        encoded = base64.b64encode(path.read_bytes()).decode("ascii")
        out.append(
            {
                "split": split,
                "category": category,
                "file": str(path.relative_to(store.lab)),
                "src": f"data:image/png;base64,{encoded}",
            }
        )
    return out
