"""Connecting to a cluster: an explicit kubeconfig, the pod's service account, or the default.

Inside a cluster (``KUBERNETES_SERVICE_HOST`` set, no kubeconfig named) the service account's
token and CA are used, so a runplane service deployed in the cluster needs no kubeconfig file.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

from runplane.errors import ConfigError


def api_client(
    kubeconfig: str | Path | None = None, context: str | None = None, pool: int = 16
) -> client.ApiClient:
    """An API client; ``pool`` bounds the connections kept open (the watches hold one each)."""
    configuration = client.Configuration()
    try:
        if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig) if kubeconfig else None,
                context=context,
                client_configuration=configuration,
            )
    except (ConfigException, OSError) as error:
        where = str(kubeconfig) if kubeconfig else "KUBECONFIG or ~/.kube/config"
        raise ConfigError(
            f"kubernetes: cannot load a cluster configuration from {where}"
            f"{f' (context {context!r})' if context else ''}: {error}"
        ) from None
    return pooled(configuration, pool)


def pooled(configuration: client.Configuration, pool: int) -> client.ApiClient:
    """A client of ``configuration`` keeping up to ``pool`` connections open. The size must be
    set before the client exists: its connection pool is made with it, and a request beyond
    the pool's size opens a connection (a TLS handshake) that is dropped after one use."""
    configuration = copy.copy(configuration)
    configuration.connection_pool_maxsize = pool
    return client.ApiClient(configuration)
