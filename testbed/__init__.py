"""A real Kubernetes control plane for runplane's integration tests, built from Go modules.

Submodules are imported on use so ``python -m testbed build`` needs only the standard library:
CI builds the binaries before any Python test dependency is installed.
"""

from __future__ import annotations

__all__ = ["build", "cluster", "pki", "topology"]
