"""The web UI of ``runplane serve``: pages over the same server, tokens and rules as the API."""

from runplane.ui.app import create_ui, mount

__all__ = ["create_ui", "mount"]
