"""A pod's program: run the invocation its variables carry, or serve, and report.

A pod runs the package as its ConfigMap lays it out (``runplane.rendering.bootstrap``): the
modules in a folder named :data:`SHIPPED_AS`, and beside it ``__main__.py``, the script the
container starts with the image's own ``python3``. When the image does have runplane (of the
same protocol), the installed copy runs instead, with whatever it adds.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from .context import Context
from .handler import call_handler
from .invocation import (
    ENV_HTTP_WORKERS,
    ENV_MOUNTS,
    ENV_RUN_DIR,
    ENV_TERMINATION_LOG,
    PROTOCOL,
    Invocation,
)
from .report import report

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

#: The package's name in a pod: the folder of the ConfigMap's volume that holds its modules.
SHIPPED_AS = "runplane_bootstrap"
_HERE = os.path.dirname(__file__)


def run_pod(environ: Mapping[str, str]) -> int:
    """A pod's run: the invocation from the environment, the report to the termination
    message (and, when large, to the output's last line)."""
    invocation = Invocation.from_env(environ)
    run_dir = Path(environ.get(ENV_RUN_DIR) or tempfile.mkdtemp(prefix="runplane-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    mounts = json.loads(environ[ENV_MOUNTS]) if ENV_MOUNTS in environ else None
    context = Context(invocation, run_dir, mounts)
    exit_code = call_handler(context, invocation)
    termination_log = Path(environ.get(ENV_TERMINATION_LOG, "/dev/termination-log"))
    return report(context, exit_code, termination_log)


def main() -> int:
    """Run this pod's invocation, with the image's own runplane when it has one that speaks
    this protocol."""
    try:
        import runplane.bootstrap as installed
    except ImportError:
        installed = None  # type: ignore[assignment]
    if (
        installed is not None
        and getattr(installed, "PROTOCOL", None) == PROTOCOL
        and os.path.realpath(os.path.dirname(installed.__file__)) != os.path.realpath(_HERE)
    ):
        return int(installed.main_of_pod(os.environ))
    return main_of_pod(os.environ)


def main_of_pod(environ: Mapping[str, str]) -> int:
    """A serving pod serves; any other pod runs its invocation once."""
    if ENV_HTTP_WORKERS in environ:
        from .server import serve  # only a serving pod needs an HTTP server

        return serve(environ)
    return run_pod(environ)
