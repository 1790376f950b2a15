"""Manifests as YAML for people to read: Secret values redacted, programs as literal blocks.

``runplane render`` prints this and the web UI shows it, so both show the same text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "<redacted>"


def redacted(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """``manifest`` with a Secret's values replaced by ``<redacted>``."""
    if manifest.get("kind") != "Secret":
        return dict(manifest)
    hidden = {key: REDACTED for key in manifest.get("stringData", {})}
    return {**manifest, "stringData": hidden}


def manifests_yaml(manifests: Iterable[Mapping[str, Any]]) -> str:
    """The manifests as one YAML stream, in the order given, Secret values redacted."""
    import yaml

    class Dumper(yaml.SafeDumper):
        """Multi-line strings (the bootstrap program) as literal blocks, readable as code."""

    def string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, string)
    documents = [redacted(manifest) for manifest in manifests]
    return yaml.dump_all(documents, Dumper=Dumper, sort_keys=False)
