"""EfficientNet-Lite as a transformers image classifier, so that a Lite folder (`config.json`
with `model_type: efficientnet_lite`, `model.safetensors`, `preprocessor_config.json`) opens
with `AutoModelForImageClassification` and `AutoImageProcessor` once `register()` has run.

The network is the model code the Lite weights were made for: `efficientnet-lite-pytorch`
0.1.0 (Apache-2.0, torch only; lukemelas' EfficientNet-PyTorch with the Lite variants), which
reproduces the logits of Google's TensorFlow Lite checkpoints. It is held whole as the submodule
`net`, so the weights keep the package's names under that prefix (`net._conv_stem.weight`,
`net._blocks.3._expand_conv.weight`, ..., the head `net._fc`).

Input size: the package builds its convolutions with TensorFlow's "same" padding computed once
for `config.image_size` (224 for Lite0). Another size would run with the wrong padding and give
quietly wrong features, so `forward` refuses it; the base's image processor (a 256 short-side
bicubic resize and a 224 centre crop for Lite0, `tunelab.demo.image_base`) always gives 224.

Written for transformers 5 (dataclass configs, `transformers.initialization`'s loading rules).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForImageClassification,
    PreTrainedConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import ImageClassifierOutput

from tunelab.core.errors import TunelabError

MODEL_TYPE = "efficientnet_lite"
VARIANTS = tuple(f"efficientnet-lite{i}" for i in range(5))
HEAD_STD = 0.01
"""A new head's weights are drawn from normal(0, HEAD_STD), its bias zero: near-uniform first
predictions, as the TF EfficientNet head starts."""


class EfficientNetLiteConfig(PreTrainedConfig):
    """An EfficientNet-Lite classifier: the variant, the input size its padding is built for, and
    its regularisation; labels as every transformers config has them (`num_labels`,
    `id2label`, `label2id`)."""

    model_type = MODEL_TYPE

    variant: str = "efficientnet-lite0"
    """One of `VARIANTS`: the width, depth and block layout (the package's `from_name`)."""
    image_size: int = 224
    """Height = width of the input; the static "same" padding is computed for it (Lite0: 224,
    the resolution it was trained at)."""
    dropout: float = 0.2
    """Dropout before the head, in training only (Lite0 was trained with 0.2)."""
    drop_connect_rate: float = 0.2
    """Stochastic depth: the largest rate a block's residual branch is dropped with in training
    (scaled by the block's depth; 0 turns it off)."""

    def __post_init__(self, **kwargs):
        if self.variant not in VARIANTS:
            raise ValueError(f"variant {self.variant!r} is not one of {', '.join(VARIANTS)}")
        if not isinstance(self.image_size, int) or self.image_size <= 0:
            raise ValueError(f"image_size must be a positive integer, not {self.image_size!r}")
        super().__post_init__(**kwargs)


class EfficientNetLiteForImageClassification(PreTrainedModel):
    """The package's `EfficientNet` as `net`, with `config.num_labels` outputs; returns
    transformers' `ImageClassifierOutput` (and the cross-entropy loss when `labels` are given).

    `_no_split_modules` names the package's block class: transformers keeps a block whole when
    it splits the model, and tunelab's LoRA default adapts the channel-mixing convolutions
    inside the blocks (`modeling.blocks`: `_expand_conv`, `_project_conv`)."""

    config: EfficientNetLiteConfig
    config_class = EfficientNetLiteConfig
    base_model_prefix = "net"
    main_input_name = "pixel_values"
    input_modalities = ("image",)
    _no_split_modules = ["MBConvBlock"]  # noqa: RUF012 (transformers' own class attribute)

    def __init__(self, config: EfficientNetLiteConfig):
        super().__init__(config)
        self.net = _efficientnet().from_name(
            config.variant,
            num_classes=config.num_labels,
            image_size=config.image_size,
            dropout_rate=config.dropout,
            drop_connect_rate=config.drop_connect_rate,
            local_pooling=False,  # the package's other pooling path prints on every forward
        )
        _plain_pointwise(self.net)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """A freshly built module's weights: convolutions He-normal (fan-out, TF EfficientNet's
        rule), batch norm the identity with fresh statistics, the head normal(0, `HEAD_STD`)
        with zero bias. Through `torch.nn.init`, which transformers' loading guards (a tensor
        it has loaded keeps its value); called directly, it always draws anew."""
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=HEAD_STD)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.modules.batchnorm._BatchNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
            nn.init.zeros_(module.running_mean)
            nn.init.ones_(module.running_var)
            nn.init.zeros_(module.num_batches_tracked)

    def forward(
        self,
        pixel_values: torch.Tensor,
        labels: torch.Tensor | None = None,
        **kwargs,
    ) -> ImageClassifierOutput:
        """Logits for (batch, 3, image_size, image_size) pixels; `kwargs` (e.g. `return_dict`
        or `output_hidden_states` from generic callers) are accepted and not used."""
        size = self.config.image_size
        if tuple(pixel_values.shape[-2:]) != (size, size):
            raise ValueError(
                f"{self.config.variant} is built for {size}x{size} inputs (its padding is fixed "
                f"for that size), got {tuple(pixel_values.shape[-2:])}; use the model's image "
                "processor, which resizes and crops to it."
            )
        logits = self.net(pixel_values)
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(logits.float(), labels.to(logits.device))
        return ImageClassifierOutput(loss=loss, logits=logits)


def _plain_pointwise(net: nn.Module) -> None:
    """Swap the package's 1x1, stride-1 convolutions (`_expand_conv`, `_project_conv`,
    `_conv_head`) for plain `nn.Conv2d`s of the same shape: "same" padding is none for them, so
    the output is the same, bit for bit, and so are the weights' names. PEFT builds a LoRA
    layer's A and B convolutions with the adapted layer's own class, and the package's padded
    class cannot be built that way (it needs an image size)."""
    from efficientnet_lite_pytorch.utils import Conv2dStaticSamePadding, Identity

    for parent in list(net.modules()):
        for name, conv in list(parent.named_children()):
            if not (
                isinstance(conv, Conv2dStaticSamePadding)
                and isinstance(conv.static_padding, Identity)
                and tuple(conv.kernel_size) == (1, 1)
                and tuple(conv.stride) == (1, 1)
                and tuple(conv.padding) == (0, 0)
            ):
                continue
            plain = nn.Conv2d(
                conv.in_channels,
                conv.out_channels,
                kernel_size=1,
                groups=conv.groups,
                bias=conv.bias is not None,
                device=conv.weight.device,
                dtype=conv.weight.dtype,
            )
            setattr(parent, name, plain)


def _efficientnet():
    """The package's `EfficientNet` class, or a TunelabError saying how to install it."""
    try:
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError as err:
        raise TunelabError(
            "EfficientNet-Lite models need the package 'efficientnet-lite-pytorch'; install it "
            "with `pip install --no-deps efficientnet-lite-pytorch==0.1.0`."
        ) from err
    return EfficientNet


_REGISTERED = False


def register() -> None:
    """Let `AutoConfig` and `AutoModelForImageClassification` open `efficientnet_lite`
    folders. Idempotent: later calls do nothing."""
    global _REGISTERED
    if _REGISTERED:
        return
    AutoConfig.register(MODEL_TYPE, EfficientNetLiteConfig, exist_ok=True)
    AutoModelForImageClassification.register(
        EfficientNetLiteConfig, EfficientNetLiteForImageClassification, exist_ok=True
    )
    _REGISTERED = True
