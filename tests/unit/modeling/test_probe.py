"""The linear probe's head: fitted by scikit-learn, stored as safetensors, applied with numpy."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors import safe_open
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from tunelab.core.errors import TunelabError
from tunelab.modeling.probe import fit_head, load_head, save_head


def _data(classes: int, n: int = 90, width: int = 12, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = [f"c{i % classes}" for i in range(n)]
    x = rng.normal(size=(n, width)).astype(np.float32)
    x[:, 0] += 2.0 * np.array([i % classes for i in range(n)])  # a learnable signal
    return x, y, rng.normal(size=(40, width)).astype(np.float32)


@pytest.mark.parametrize("classes", [2, 3])
def test_a_stored_head_gives_the_pipelines_probabilities(tmp_path, classes):
    x, y, unseen = _data(classes)
    pipeline = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(x, y)
    save_head(fit_head(x, y), tmp_path / "head.safetensors")
    head = load_head(tmp_path / "head.safetensors")
    expected = pipeline.predict_proba(unseen)
    got = head.predict_proba(unseen)
    assert head.classes == [str(c) for c in pipeline.classes_]
    assert np.abs(got - expected).max() <= 1e-6
    assert (got.argmax(1) == expected.argmax(1)).all()
    rows = [{"id": str(i), "label": "c0"} for i in range(len(unseen))]
    predicted = [p["predicted"] for p in head.predictions(rows, unseen)]
    assert predicted == list(pipeline.predict(unseen))


def test_the_file_holds_the_four_arrays_and_the_class_order(tmp_path):
    x, y, _ = _data(3)
    save_head(fit_head(x, y), tmp_path / "head.safetensors")
    with safe_open(str(tmp_path / "head.safetensors"), framework="numpy") as fh:
        shapes = {k: fh.get_tensor(k).shape for k in fh.keys()}  # noqa: SIM118
        metadata = fh.metadata()
    assert shapes == {"mean": (12,), "scale": (12,), "coef": (3, 12), "intercept": (3,)}
    assert json.loads(metadata["classes"]) == ["c0", "c1", "c2"]
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_file_that_is_not_a_head_is_refused_naming_it(tmp_path):
    bad = tmp_path / "probe_head.safetensors"
    bad.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}garbage")
    with pytest.raises(TunelabError, match=r"probe_head\.safetensors: not a probe head"):
        load_head(bad)


def test_a_long_embedding_says_how_far_it_has_come(tiny_bert, monkeypatch):
    """A 100,000-row probe embedded for minutes after one line: the baseline now says how far
    it has come every few seconds (here every call: the clock's step is set to 0)."""
    import io

    import torch
    from rich.console import Console

    from tunelab.core.spec import ModelSpec
    from tunelab.modeling import classifier_inputs
    from tunelab.modeling.model import load_encoder, load_tokenizer
    from tunelab.modeling.probe import features
    from tunelab.stages.baseline import measure

    monkeypatch.setattr(measure, "PROGRESS_S", 0.0)
    monkeypatch.setattr(classifier_inputs, "ENCODE_CHUNK", 2)
    out = io.StringIO()
    say = measure.every_few_seconds(Console(file=out, width=200), "embedding train")
    tokenising = measure.every_few_seconds(Console(file=out, width=200), "tokenising train")
    spec = ModelSpec(path=str(tiny_bert))
    encoder = load_encoder(spec, tiny_bert, torch.device("cpu"))
    rows = [{"id": str(i), "text": f"note {i} on rates", "label": "a"} for i in range(5)]
    tok = load_tokenizer(spec, tiny_bert)
    x = features(encoder, tok, rows, ["a"], 16, 2, torch.device("cpu"), say, tokenising)
    assert x.shape[0] == 5
    lines = out.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == [  # each from its own first call
        "tokenising train: 2 of 5",
        "tokenising train: 4 of 5",
        "embedding train: 2 of 5",
        "embedding train: 4 of 5",
    ]
