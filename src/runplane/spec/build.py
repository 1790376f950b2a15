"""The code a function runs and the recipe of its image, recorded with the function."""

from __future__ import annotations

import base64
import binascii
from functools import partial
from typing import Any

import pydantic

from runplane.errors import InvalidValueError
from runplane.spec.base import SpecModel, checked
from runplane.spec.bounds import MAX_SOURCE_BYTES, check_lines, check_text
from runplane.spec.volumes import check_relative_path


class BuildSpec(SpecModel):
    """The code a function runs, embedded so the function runs anywhere without the file."""

    field_path = "spec.build"

    #: The code, base64-encoded UTF-8 text.
    source: str = ""
    #: Its file name, relative: the name the handler's module is loaded under.
    filename: str = ""
    #: An image build's recipe, recorded with the function (``with_requirements``,
    #: ``build_function``): runs here need no image; a cluster's image must have them.
    base_image: str = ""
    #: The image such a build would produce (``build_config(image=...)``), recorded.
    image: str = ""
    requirements: list[str] = pydantic.Field(default_factory=list)
    commands: list[str] = pydantic.Field(default_factory=list)
    #: An archive or repository of the code (``with_source_archive``), recorded.
    source_archive: str = ""

    _lines = checked(
        "requirements",
        "commands",
        by=partial(check_lines, example="['pandas==2.2']", line_example="'pandas==2.2'"),
    )

    @pydantic.field_validator("source", mode="before")
    @classmethod
    def _source(cls, value: Any) -> Any:
        if value == "":
            return value
        example = "code_to_function(..., filename='train.py') embeds it"
        if not isinstance(value, str) or len(value) > 2 * MAX_SOURCE_BYTES:
            raise InvalidValueError(
                "spec.build.source", value, "base64 of the code's UTF-8 text", example
            )
        try:
            code = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise InvalidValueError(
                "spec.build.source", value, "base64 of the code's UTF-8 text", example
            ) from None
        check_text("spec.build.source (decoded)", code, MAX_SOURCE_BYTES, example)
        return value

    @pydantic.field_validator("filename", mode="before")
    @classmethod
    def _filename(cls, value: Any) -> Any:
        if value == "":
            return value
        check_relative_path("spec.build.filename", value, "'train.py'")
        return value
