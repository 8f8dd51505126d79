"""Whether an adapter loads in LoRA-only serving engines, read from its PEFT config."""

from __future__ import annotations

import json

from tunelab.stages.export.serving import not_plain, serving

PLAIN = {"target_modules": ["q_proj", "v_proj"], "bias": "none", "modules_to_save": None}


def test_a_plain_lora_has_nothing_in_the_way():
    assert not_plain(PLAIN) == []


def test_each_thing_lora_only_engines_refuse_is_named():
    found = not_plain(
        PLAIN
        | {
            "modules_to_save": ["classifier", "score", "classifier"],
            "target_modules": ["q_proj", "model.lm_head", "embed_tokens"],
            "use_dora": True,
            "bias": "lora_only",
            "trainable_token_indices": [5],
        }
    )
    assert [w.split(":")[0] for w in found] == [
        "modules_to_save ['classifier', 'score']",
        "LoRA on ['embed_tokens', 'model.lm_head']",
        "DoRA",
        "a LoRA bias",
        "trainable token rows",
    ]


def test_the_servable_form_is_the_merged_folder_or_the_command_that_makes_it(tmp_path):
    (tmp_path / "adapter_config.json").write_text(json.dumps(PLAIN | {"modules_to_save": ["x"]}))
    assert serving(tmp_path, "lora", merged=True)["servable"].startswith("merged/")
    assert "--merge" in serving(tmp_path, "lora", merged=False)["servable"]
    named = serving(tmp_path, "lora", merged=False, run="r003-lora")["servable"]
    assert "run `tunelab export r003-lora --merge --out " in named  # it read `RUN
    # the bundle's own folder is taken, and the lab may be elsewhere: as printed it was refused
    lab = tmp_path / "lab"
    said = serving(tmp_path, "lora", merged=False, run="r3", lab=lab)["servable"]
    assert said.endswith(f"`tunelab export r3 --merge --out {tmp_path}-merged --lab {lab}`")
    assert serving(tmp_path, "full", merged=False)["plain_lora"] is None


def test_only_the_saved_modules_the_adapter_holds_are_named(tmp_path):
    """PEFT lists a BERT's and a decoder's head for every sequence classifier: a Qwen3 bundle
    said "modules_to_save ['classifier', 'score']", and Qwen3 has no `classifier`."""
    import numpy as np
    from safetensors.numpy import save_file

    config = PLAIN | {"modules_to_save": ["classifier", "score"]}
    (tmp_path / "adapter_config.json").write_text(json.dumps(config))
    weights = {"base_model.model.score.modules_to_save.default.weight": np.zeros((2, 4), "f4")}
    save_file(weights, str(tmp_path / "adapter_model.safetensors"))
    said = serving(tmp_path, "lora", merged=False)
    assert [w.split(":")[0] for w in said["why"]] == ["modules_to_save ['score']"]
