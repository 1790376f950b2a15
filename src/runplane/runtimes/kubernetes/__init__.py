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
``watch`` (list-then-watch loop), ``tracker`` (observations to de-duplicated events),
``pod_events`` (pod -> RunEvent, pure), ``deploy`` (server-side apply), ``cluster`` (node
summary, pure), ``calls`` (retries and errors), ``rest`` (raw JSON requests), ``client``
(kubeconfig / in-cluster).
"""

from runplane.runtimes.kubernetes.calls import ClusterError
from runplane.runtimes.kubernetes.pod_events import pod_to_event
from runplane.runtimes.kubernetes.runtime import KubernetesRuntime
from runplane.runtimes.kubernetes.watch import PodWatch, WatchStats

__all__ = ["ClusterError", "KubernetesRuntime", "PodWatch", "WatchStats", "pod_to_event"]
