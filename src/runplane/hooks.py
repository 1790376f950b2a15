"""The client layer, as the layers below it may call it.

The documents put ``run()`` and ``deploy()`` on the function object, yet running a function is
the client layer's work, and the client depends on ``spec``, never the reverse. So ``Function``
calls through the one slot here, and the package root (``runplane/__init__.py``), which sits above
every layer and is imported before any of them, fills it.
"""

from __future__ import annotations

# Not imported from `typing` at run time: the package root imports this module, and importing
# typing costs several times what `import runplane` does without it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

    class Client(Protocol):
        def run(self, function: Any, arguments: Any, /) -> Any:
            """Run ``function`` ("Run now"), or store a schedule for it ("Schedule for later"),
            as ``arguments`` (a :class:`~runplane.spec.run_options.RunArguments`) say."""

        def deploy(self, function: Any, /) -> Any:
            """Deploy a serving function."""

        def invoke(self, function: Any, /, **options: Any) -> Any:
            """Call a deployed serving function."""

        def dask_client(self, function: Any, /) -> Any:
            """A dask function's client, its cluster started on first use."""

        def close(self, function: Any, /) -> None:
            """Stop a dask function's cluster."""

        def save(self, function: Any, /) -> str:
            """Store the function where runs go; returns its URI."""

        def mlrun_defaults(self) -> dict[str, Any]:
            """What MLRun fills into a function read from its dict form: ``preemption_mode``
            and ``image_pull_secret`` (``mlconf``'s, as set); and the ``priority_classes`` a
            function may name."""

        def project(self, data: Any, /) -> Any:
            """A project object from its stored record or its ``to_dict()`` form."""


_client: Client | None = None


def register(client: Client) -> None:
    global _client
    _client = client


def client() -> Client:
    if _client is None:  # only when runplane/__init__.py was bypassed
        raise RuntimeError("runplane's client is not registered: import runplane first")
    return _client
