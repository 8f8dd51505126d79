"""How a spec's YAML is read: YAML 1.2's booleans, `true` and `false` alone, and each key once.

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
MERGE = "tag:yaml.org,2002:merge"


class SpecLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's booleans, refusing a key given twice in one
    mapping (PyYAML keeps the last silently: an `lr` edited in below the old one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == MERGE:  # `<<: *defaults` and the keys that override it
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"the key {key!r} is given twice in one mapping, at lines {seen[key]} and "
                    f"{key_node.start_mark.line + 1}: keep one",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


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
