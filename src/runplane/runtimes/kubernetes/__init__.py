"""The Kubernetes runtime: rendered pods run on a cluster, pod changes come back as run events.

Client: the official ``kubernetes`` package (kubernetes-client/python), used synchronously.

* It is the project's maintained client, generated from each release's OpenAPI spec, so new
  fields and API versions arrive with the cluster versions; kubeconfig, exec/OIDC auth plugins
  and in-cluster service accounts all work the way ``kubectl`` does.
* runplane already depends on it (the testbed and the tests use it), so the runtime adds no
  second client with its own auth and TLS code paths.
* The work is one long-lived watch per service plus a few short requests per run. One thread
  for the watch and blocking calls for launch/abort cost nothing at that scale; an async
  service calls them through ``asyncio.to_thread``, and reads events from the runtime's
  asynchronous channel. ``kubernetes_asyncio`` is a separate port that trails the official
  client; lightkube is typed and pleasant but depends on a much smaller maintainer base.

Modules: ``runtime`` (the runtime contract), ``submit`` (idempotent pod and Secret creation),
``tracker`` (observations to de-duplicated events), ``pod_events`` (pod -> RunEvent, pure),
``gang`` and ``podgroup`` (runs of several pods), ``logspool`` (run output), ``nodes`` (node
groups and node loss), ``deploy`` (server-side apply), ``cluster`` (node summary, pure). They
talk to the cluster through :mod:`.api`, the generic client that knows nothing of runs
(connection, raw JSON requests, retries, the list-then-watch loop).
"""

from runplane.runtimes.kubernetes.api.calls import ClusterError
from runplane.runtimes.kubernetes.api.watch import PodWatch, WatchStats
from runplane.runtimes.kubernetes.pod_events import pod_to_event
from runplane.runtimes.kubernetes.runtime import KubernetesRuntime

__all__ = ["ClusterError", "KubernetesRuntime", "PodWatch", "WatchStats", "pod_to_event"]
