"""How a spec's YAML is read: YAML 1.2's booleans, `true` and `false` alone.

PyYAML follows YAML 1.1, where `on`, `off`, `yes` and `no` are booleans too: a forgetting
guardrail's key `on:` was read as the boolean True ("Keys should be strings"), and a text
such as `task.instruction=no` became False. Here they stay strings; a boolean field still
takes `yes` or `on` (pydantic reads them as true).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

BOOL = "tag:yaml.org,2002:bool"


class SpecLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's booleans."""


SpecLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != BOOL]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
SpecLoader.add_implicit_resolver(
    BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def load_yaml(text: str) -> Any:
    """`text` read as YAML with the spec's rules (`yaml.safe_load` with YAML 1.2's booleans)."""
    return yaml.load(text, Loader=SpecLoader)
