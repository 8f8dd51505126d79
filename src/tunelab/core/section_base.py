"""What every spec section stands on: the strict pydantic base and the cross-field error."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class FieldError(ValueError):
    """A check across fields that names the field it is about (dotted, relative to the section
    whose validator raises it), so the error is reported at that field's line of the spec."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
