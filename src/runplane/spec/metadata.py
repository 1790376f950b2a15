"""A function's name, project, tag and labels: what it is stored and found by."""

from __future__ import annotations

from typing import Any

import pydantic

from runplane.spec.base import SpecModel, checked
from runplane.spec.labels import check_dns_label, check_labels, normalize_name


class Metadata(SpecModel):
    field_path = "metadata"

    name: str
    project: str = "default"
    tag: str = ""
    labels: dict[str, str] = pydantic.Field(default_factory=dict)

    @pydantic.field_validator("name", mode="before")
    @classmethod
    def _name(cls, value: Any) -> Any:
        """Normalised with a warning; empty until a run names it after its handler
        (``new_function().run(handler=train)``)."""
        if value == "":
            return value
        return check_dns_label("metadata.name", normalize_name("metadata.name", value))

    _project = checked("project", by=check_dns_label)
    _labels = checked("labels", by=check_labels)
