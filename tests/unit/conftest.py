"""Unit-test fixtures: settings isolated from the developer's own configuration, and the
Kubernetes OpenAPI schema check every rendered manifest goes through."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from runplane.config import Settings, load_settings

#: The Kubernetes release whose OpenAPI schema rendered manifests must satisfy.
KUBERNETES_SCHEMA_VERSION = "1.35.0"


@pytest.fixture(autouse=True)
def isolated_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[None]:
    """No test reads ~/.runplane or RUNPLANE_* from the machine it runs on."""

    for name in list(os.environ):
        if name.startswith("RUNPLANE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RUNPLANE_CONFIG", os.devnull)
    from runplane import config

    config.current.cache_clear()
    yield
    config.current.cache_clear()


@pytest.fixture
def settings() -> Settings:
    return load_settings()


def assert_valid_manifests(manifests: list[dict[str, Any]]) -> None:
    """Every manifest validates against the strict Kubernetes schema (unknown fields fail)."""
    import kubernetes_validate

    for manifest in manifests:
        kubernetes_validate.validate(manifest, KUBERNETES_SCHEMA_VERSION, strict=True)
