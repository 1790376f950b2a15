"""The Kubernetes API as runplane speaks it, knowing nothing of runs: a connection, raw JSON
requests, retries, and the list-then-watch loop.

Kept apart from the run logic around it (submission, events, gangs, log copies, deploys), so
that whatever else talks to a cluster (an operator, a queue, a resize) builds on the same
client, and an import-linter contract keeps it from reaching back.

Modules: ``client`` (kubeconfig / in-cluster connection), ``rest`` (raw JSON requests and
streamed reads, where each kind lives), ``calls`` (retries and refusals in one namespace),
``backoff`` (jittered delays), ``watch`` (list-then-watch loop), ``namespaces`` (the
namespace is there before anything goes into it).
"""
