"""The Kubernetes runtime: rendered pods run on a cluster, pod changes come back as run events.

Client: the official ``kubernetes`` package (kubernetes-client/python), used synchronously.

* It is the project's maintained client, generated from each release's OpenAPI spec, so new
  fields and API versions arrive with the cluster versions; kubeconfig, exec/OIDC auth plugins
  and in-cluster service accounts all work the way ``kubectl`` does.
* runplane already depends on it (the testbed and the tests use it), so the runtime adds no
  second client with its own auth and TLS code paths.
* The runtime interface is synchronous (a plain listener callback, like the local runtime's),
  and the work is one long-lived watch per service plus a few short requests per run. One
  thread for the watch and blocking calls for submit/abort cost nothing at that scale; an async
  service calls ``submit``/``abort`` through ``asyncio.to_thread``. ``kubernetes_asyncio`` is a
  separate port that trails the official client; lightkube is typed and pleasant but depends
  on a much smaller maintainer base. Should an async core ever be needed, the official package
  ships ``kubernetes.aio`` with the same models, and only ``watch.py`` and ``runtime.py``
  would change, not the pure mapping in ``pod_events.py``.

Modules: ``pod_events`` (pod -> RunEvent, pure), ``watch`` (list-then-watch loop), ``runtime``
(submit, abort, de-duplicated events), ``client`` (kubeconfig / in-cluster), ``names`` (labels).
"""

from runplane.runtimes.kubernetes.pod_events import pod_to_event
from runplane.runtimes.kubernetes.runtime import ClusterError, KubernetesRuntime
from runplane.runtimes.kubernetes.watch import PodWatch, WatchStats

__all__ = ["ClusterError", "KubernetesRuntime", "PodWatch", "WatchStats", "pod_to_event"]
