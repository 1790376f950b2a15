"""The shapes of the names a request gives, in its path, its query or its body: checked by
the API before a route runs, so a route never meets a name no store could hold."""

from __future__ import annotations

from typing import Annotated

import pydantic
from fastapi import Path

_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
Name = Annotated[str, pydantic.StringConstraints(pattern=_NAME, max_length=63)]
PathName = Annotated[str, Path(pattern=_NAME, max_length=63)]
Uid = Annotated[str, Path(min_length=6, max_length=32, pattern=r"^[0-9a-f]+$")]
ScheduleId = Annotated[str, Path(min_length=1, max_length=32)]
#: A node's name: a DNS subdomain, as Kubernetes names nodes.
_SUBDOMAIN = _NAME[:-1] + r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
NodeName = Annotated[str, Path(max_length=253, pattern=_SUBDOMAIN)]
