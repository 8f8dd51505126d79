"""Load the base model, apply LoRA or full fine-tuning, report what trains (its identity:
`modeling.identity`)."""

from __future__ import annotations

from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, TaskType, get_peft_model
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForImageClassification,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.pytorch_utils import Conv1D

from tunelab.core.layout import CACHE
from tunelab.core.spec import FullMethod, LoraMethod, ModelSpec
from tunelab.core.store import STORE_DIR
from tunelab.modeling.base_folder import ModelError, resolve_path
from tunelab.modeling.blocks import block_linears, is_linear
from tunelab.modeling.render import pad_id
from tunelab.modeling.safety import (
    MODULES,
    remote_kwargs,
    require_safetensors,
    use_modules_cache,
)

BLOCK_LINEARS = "(every linear layer of the blocks)"
"""How the trainable report names the default targets (`method.target_modules` left out)."""
BLOCK_CONVS = "(every channel-mixing convolution of the blocks)"
"""The same default on a convolutional network whose blocks hold no linear layer."""
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def load_tokenizer(
    spec: ModelSpec, lab: Path, data_version: str | None = None
) -> PreTrainedTokenizerBase:
    """The base's tokenizer; a scratch model's (`modeling.bpe`: the BPE of `data_version`'s
    train split, by default the current version's)."""
    if spec.scratch:
        from tunelab.modeling.bpe import scratch_tokenizer

        return scratch_tokenizer(spec, lab, data_version)[0]
    path = resolve_path(spec, lab)
    return AutoTokenizer.from_pretrained(path, **lab_remote_kwargs(spec, path, lab))


def lab_remote_kwargs(spec: ModelSpec, path: Path, lab: Path) -> dict:
    """`trust_remote_code` for a from_pretrained call (`safety.remote_kwargs`: a Hub
    `auto_map` refused, a warning); when it is true and the lab has a store, transformers'
    modules cache is pointed into it (`.tunelab/cache/modules`) first."""
    if spec.trust_remote_code and (lab / STORE_DIR).is_dir():
        use_modules_cache(lab / STORE_DIR / CACHE / MODULES)
    return remote_kwargs(spec, path)


def weights_kwargs(spec: ModelSpec, path: Path, lab: Path) -> dict:
    """What every load of pretrained weights passes: safetensors only, the dtype, and
    `trust_remote_code` (warned about)."""
    return {
        "use_safetensors": True,
        "dtype": DTYPES[spec.dtype],
        **compute_kwargs(spec),
        **lab_remote_kwargs(spec, path, lab),
    }


def compute_kwargs(spec: ModelSpec) -> dict:
    """How the loaded model computes: `attn_implementation` when the spec names one
    (`model.attention`), else transformers' own choice; and the model's own torch code, never
    kernels transformers would fetch from the Hub for CUDA (offline that load fails;
    `tunelab.load_bundle` in a user's process too, where the CLI's `USE_HUB_KERNELS=NO` is
    not set)."""
    own = {"use_kernels": False}
    return own if spec.attention == "auto" else {**own, "attn_implementation": spec.attention}


def load_encoder(spec: ModelSpec, lab: Path, device: torch.device) -> PreTrainedModel:
    """The bare pretrained encoder (no head), frozen, for the linear-probe baseline."""
    path = resolve_path(spec, lab)
    model = AutoModel.from_pretrained(path, **weights_kwargs(spec, path, lab))
    return model.to(device).eval().requires_grad_(False)


def load_classifier(
    spec: ModelSpec, lab: Path, labels: list[str], device: torch.device
) -> PreTrainedModel:
    """A sequence classifier on the pretrained encoder with a head for `labels`: a checkpoint's
    own head only when it already predicts exactly these labels in this order, else a new one
    drawn from torch's seed (a head of another size, or of the same size for other labels, is
    not kept), as an image classifier's (`image_model.load_image_classifier`)."""
    from tunelab.modeling.head_init import head_layer, redraw

    path = resolve_path(spec, lab)
    model, loading = AutoModelForSequenceClassification.from_pretrained(
        path,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)},
        ignore_mismatched_sizes=True,  # a fine-tuned checkpoint's head of other labels goes
        output_loading_info=True,
        **weights_kwargs(spec, path, lab),
    )
    name, layer = head_layer(model, len(labels))
    fresh = set(loading["missing_keys"]) | {k[0] for k in loading["mismatched_keys"]}
    loaded = not any(k.startswith(f"{name}.") for k in fresh)
    if loaded and _checkpoint_labels(path, spec, lab) != labels:  # same size, other labels
        redraw(model, layer)
    model.drawn_at_random = drawn_at_random(model, fresh, name)
    # a decoder's classifier (GPT-2, Llama...) pools its last token that is not the config's
    # pad id (and refuses batches without one): the id batches are padded with, always. A
    # tokenizer whose pad token was another had it pool a padding position, so every
    # prediction depended on its batch (the check's `padding` item)
    model.config.pad_token_id = pad_id(load_tokenizer(spec, lab))
    return model.to(device)


def drawn_at_random(model: PreTrainedModel, missing: set[str], head: str) -> list[str]:
    """The modules besides the head whose weights the checkpoint lacks, so drawn at random: a
    masked-LM checkpoint has no pooler (DeBERTa-v3's, ALBERT's). Under LoRA they are trained
    and saved with the head (`apply_method`): frozen at random and left out of the adapter, the
    bundle had reproduced none of its predictions."""
    params = dict(model.named_parameters())
    modules = {k.rsplit(".", 1)[0] for k in missing if k in params and "." in k}
    # the head's own module is new and saved whole already: RoBERTa's and ELECTRA's head is
    # `classifier` (dense, then out_proj), and naming `classifier.dense` again inside it had
    # broken their LoRA (nested in PEFT's copy of `classifier`: frozen, and no bundle loaded)
    root = head.split(".")[0]
    return sorted(m for m in modules if m.split(".")[0] != root)


def _checkpoint_labels(path: Path, spec: ModelSpec, lab: Path) -> list[str]:
    """The labels a checkpoint's own head predicts, in order (its config's `id2label`)."""
    found = AutoConfig.from_pretrained(path, **lab_remote_kwargs(spec, path, lab)).id2label
    return [found[i] for i in sorted(found)]


def load_causal(
    spec: ModelSpec,
    lab: Path,
    device: torch.device,
    seed: int = 0,
    data_version: str | None = None,
) -> PreTrainedModel:
    """A causal LM for generation, or for classification by scoring label texts; a scratch
    model is built from its config (for the tokenizer of `data_version`) with weights drawn
    from `seed`."""
    if spec.scratch:
        from tunelab.modeling.scratch_identity import scratch_model

        return scratch_model(spec, lab, seed, data_version).to(device)
    path = resolve_path(spec, lab)
    model = AutoModelForCausalLM.from_pretrained(path, **weights_kwargs(spec, path, lab))
    return model.to(device)


def load_base(
    spec: ModelSpec,
    lab: Path,
    kind: str,
    labels: list[str],
    device: torch.device,
    seed: int = 0,
    data_version: str | None = None,
) -> tuple[PreTrainedModel, TaskType]:
    """The model a lab trains: for an `encoder`, a classifier with a new head for `labels`;
    else the causal LM (a scratch one drawn from `seed`, for `data_version`'s tokenizer)."""
    if kind == "encoder":
        return load_classifier(spec, lab, labels, device), TaskType.SEQ_CLS
    if kind == "image":  # PEFT has no task type for it: `apply_method` names the head
        from tunelab.modeling.image_model import load_image_classifier  # it imports this module

        return load_image_classifier(spec, lab, labels, device), None
    return load_causal(spec, lab, device, seed, data_version), TaskType.CAUSAL_LM


def trainable_model(
    spec: ModelSpec,
    method: LoraMethod | FullMethod,
    kind: str,
    lab: Path,
    labels: list[str],
    device: torch.device,
    seed: int,
    checkpointing: bool = False,
    data_version: str | None = None,
) -> tuple[torch.nn.Module, dict]:
    """The model a run trains and its trainable report: the base (a new classification head's
    initial weights come from `seed`, the one place a model build seeds torch) with the method
    applied, and activation checkpointing when asked. Raises ModelError (with `.modules`) when
    LoRA targets match nothing. A scratch model's tokenizer is `data_version`'s (default: the
    current version's)."""
    torch.manual_seed(seed)
    base, task_type = load_base(spec, lab, kind, labels, device, seed, data_version)
    # PEFT extends modules_to_save in place: the spec's own method stays as it was written
    model, report = apply_method(base, method.model_copy(deep=True), task_type)
    if checkpointing:
        report["activation_checkpointing"] = enable_checkpointing(model)
    return model, report


def enable_checkpointing(model) -> str:
    """Activation checkpointing on the transformers model (inside a PEFT wrapper), non-reentrant
    so LoRA's frozen inputs still pass gradients; returns the call used."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if not getattr(base, "supports_gradient_checkpointing", True):
        raise ModelError(
            f"training.activation_checkpointing: {type(base).__name__} does not support "
            "activation checkpointing in transformers; set it to false (a smaller "
            "training.microbatch with more accumulation also lowers the memory)"
        )
    kwargs = {"use_reentrant": False}
    if hasattr(base, "activation_checkpointing_enable"):  # transformers >= 5.x
        base.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        call = "activation_checkpointing_enable(use_reentrant=False)"
    else:
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        call = "gradient_checkpointing_enable(use_reentrant=False)"
    if base is not model and getattr(base, "_require_grads_hook", None) is None:
        base.enable_input_require_grads()  # frozen embeddings: let gradients reach LoRA layers
    return call


def _matches(name: str, pattern: str) -> bool:
    """PEFT's rule for a list of target names: the full name or its last components."""
    return name == pattern or name.endswith("." + pattern)


def check_targets(model: torch.nn.Module, method: LoraMethod) -> dict[str, list[str]]:
    """Each target and module to save must match a module; else name the ones that exist."""
    names = [n for n, _ in model.named_modules() if n]
    linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if is_linear(m)})
    if method.target_modules is None:  # the default: every linear layer of the blocks
        found = block_linears(model)
        if not found:
            raise ModelError(
                "method.target_modules is left out, which means every linear layer of the "
                "model's transformer blocks, and no blocks were found in this model; name the "
                f"layers to adapt in method.target_modules. Linear layers it has: {linear}",
                names,
            )
        modules = dict(model.named_modules())
        convs = all(isinstance(modules[n], torch.nn.Conv2d) for n in found)
        matched = {BLOCK_CONVS if convs else BLOCK_LINEARS: found}
    else:
        matched = {p: [n for n in names if _matches(n, p)] for p in method.target_modules}
    missing = [p for p, hits in matched.items() if not hits]
    with_params = sorted(
        {
            n.rsplit(".", 1)[-1]
            for n, m in model.named_modules()
            if n and next(m.parameters(recurse=False), None) is not None
        }
    )
    if missing:
        raise ModelError(
            f"method.target_modules {missing} match no module of this model. "
            f"Linear layers it has: {linear}",
            with_params,
        )
    top = sorted({n.split(".")[0] for n in names})
    unsaved = [p for p in method.modules_to_save or [] if not any(_matches(n, p) for n in names)]
    if unsaved:
        raise ModelError(
            f"method.modules_to_save {unsaved} match no module of this model. "
            f"Top-level modules: {top}",
            with_params,
        )
    return matched


def _hits(matched: dict[str, list[str]]) -> list[str]:
    return [n for hits in matched.values() for n in hits]


def apply_method(
    model: PreTrainedModel, method: LoraMethod | FullMethod, task_type: TaskType | None
) -> tuple[torch.nn.Module, dict]:
    """Wrap with LoRA (PEFT) or leave every weight trainable but those no gradient can reach
    (`scratch.untrainable`, in the report); return the trainable report.
    Without a task type (an image classifier) the new head is added to the modules LoRA trains
    whole and saves, as PEFT does itself for a sequence classifier's."""
    report: dict = {"method": method.type}
    fresh = getattr(model, "drawn_at_random", None) or []
    if fresh:  # no weights in the checkpoint: trained from their random start, and said
        report["drawn_at_random"] = fresh
    if isinstance(method, LoraMethod):
        if task_type is None:
            from tunelab.modeling.head_init import head_layer

            head = head_layer(model, model.config.num_labels)[0]
            method.modules_to_save = sorted({*(method.modules_to_save or []), head})
        if fresh:
            method.modules_to_save = sorted({*(method.modules_to_save or []), *fresh})
        matched = check_targets(model, method)
        modules = dict(model.named_modules())
        config = LoraConfig(
            task_type=task_type,
            r=method.r,
            lora_alpha=method.alpha,
            lora_dropout=method.dropout,
            # GPT-2's Conv1D stores its weight transposed: PEFT would switch this on with a
            # warning; a mix of layer kinds is left to PEFT, layer by layer
            fan_in_fan_out=all(isinstance(modules[n], Conv1D) for n in _hits(matched)),
            target_modules=_hits(matched)
            if method.target_modules is None
            else method.target_modules,
            modules_to_save=list(method.modules_to_save or []) or None,  # PEFT extends it
        )
        model = get_peft_model(model, config)
        report["target_modules"] = {p: len(hits) for p, hits in matched.items()}
        report["adapted_modules"] = sorted(model.targeted_module_names)
        # PEFT lists both heads' names for a sequence classifier: only the model's own count
        saved = model.modules_to_save or []
        report["modules_to_save"] = sorted(m for m in saved if any(_matches(n, m) for n in modules))
    else:
        from tunelab.modeling.scratch import untrainable

        dead = untrainable(model)
        for name, param in model.named_parameters():  # every tensor trains but the dead
            param.requires_grad_(name not in dead)
        if dead:  # frozen, and said so: the check holds them to it
            report["untrainable"] = {"tensors": sorted(dead), "why": sorted(set(dead.values()))}
    trainable = {n: p.numel() for n, p in model.named_parameters() if p.requires_grad}
    total = sum(p.numel() for p in model.parameters())
    report["trainable_params"] = sum(trainable.values())
    report["total_params"] = total
    report["trainable_fraction"] = report["trainable_params"] / total
    report["trainable_tensors"] = len(trainable)
    return model, report


def load_trained(
    spec: ModelSpec,
    lab: Path,
    weights: Path,
    device: torch.device,
    labels: list[str] | None,
    kind: str,
) -> torch.nn.Module:
    """A run's trained model: the classifier of `kind` (a text `encoder` or an `image` one, its
    head one output per label) or, for any other kind, the causal LM (`labels` unused)."""
    if kind in ("encoder", "image"):
        return load_trained_classifier(spec, lab, labels, weights, device, kind)
    require_safetensors(weights, "the trained weights")
    if (weights / "adapter_config.json").exists():
        return PeftModel.from_pretrained(load_causal(spec, lab, device), weights).to(device).eval()
    model = AutoModelForCausalLM.from_pretrained(
        weights, dtype=DTYPES[spec.dtype], use_safetensors=True, **compute_kwargs(spec)
    )
    return model.to(device).eval()


def load_trained_classifier(
    spec: ModelSpec,
    lab: Path,
    labels: list[str],
    weights: Path,
    device: torch.device,
    kind: str = "encoder",
) -> torch.nn.Module:
    """Rebuild a trained classifier (a text `encoder` or an `image` one) from a run's saved
    weights (adapter or full model)."""
    require_safetensors(weights, "the trained weights")
    image = kind == "image"
    if image:
        from tunelab.modeling.lite import register

        register()  # a fully fine-tuned EfficientNet-Lite's saved config names its model type
    if (weights / "adapter_config.json").exists():
        from tunelab.modeling.image_model import load_image_classifier  # it imports this module

        load = load_image_classifier if image else load_classifier
        return PeftModel.from_pretrained(load(spec, lab, labels, device), weights).to(device).eval()
    auto = AutoModelForImageClassification if image else AutoModelForSequenceClassification
    model = auto.from_pretrained(
        weights, dtype=DTYPES[spec.dtype], use_safetensors=True, **compute_kwargs(spec)
    )
    return model.to(device).eval()
