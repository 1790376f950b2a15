"""Connecting to a cluster: an explicit kubeconfig, the pod's service account, or the default.

Inside a cluster (``KUBERNETES_SERVICE_HOST`` set, no kubeconfig named) the service account's
token and CA are used, so a runplane service deployed in the cluster needs no kubeconfig file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

from runplane.errors import ConfigError


def api_client(
    kubeconfig: str | Path | None = None, context: str | None = None, pool: int = 16
) -> client.ApiClient:
    """An API client; ``pool`` bounds concurrent connections (the watch holds one)."""
    try:
        if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            api = client.ApiClient(configuration)
        else:
            api = cast(
                client.ApiClient,
                config.new_client_from_config(  # type: ignore[no-untyped-call]
                    config_file=str(kubeconfig) if kubeconfig else None, context=context
                ),
            )
    except (ConfigException, OSError) as error:
        where = str(kubeconfig) if kubeconfig else "KUBECONFIG or ~/.kube/config"
        raise ConfigError(
            f"kubernetes: cannot load a cluster configuration from {where}"
            f"{f' (context {context!r})' if context else ''}: {error}"
        ) from None
    api.configuration.connection_pool_maxsize = pool
    return api
