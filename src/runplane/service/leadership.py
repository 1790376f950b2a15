"""This replica's part in leader election (``service.leader_election``): one thread acquires
the Lease, has the service lead, renews, and deposes the service when a renewal fails past the
deadline (:mod:`runplane.runtimes.kubernetes.api.lease`).

Leading begins in a thread of its own, as client-go runs ``OnStartedLeading``: a start that
reconciles thousands of runs must not hold up the renewals. A replica that lost the lead stops
controlling at once and does not lead again: ``runplane serve`` then exits, and its restart
(the kubelet's, for a pod) comes back as a follower, as kube-controller-manager and
kube-scheduler do; a service half torn down never takes the Lease again.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable

from runplane.config import LeaderElection, Settings
from runplane.runtimes.kubernetes.api.client import api_client
from runplane.runtimes.kubernetes.api.lease import LeaseElector, Timing
from runplane.runtimes.kubernetes.api.rest import RestApi

log = logging.getLogger(__name__)


def identity_of(config: LeaderElection) -> str:
    """This replica's name in the Lease: the one configured, else the pod's (``POD_NAME``,
    from the downward API) or the host's, with a random suffix so that a restarted process is
    never taken for the one before it."""
    if config.identity:
        return config.identity
    base = os.environ.get("POD_NAME") or socket.gethostname()
    return f"{base}_{uuid.uuid4().hex[:8]}"


class Leadership:
    """Acquire, lead, renew; ``lead`` is called once the Lease is held, ``lost`` once it is
    lost (never after :meth:`close`)."""

    def __init__(
        self, settings: Settings, lead: Callable[[], None], lost: Callable[[], None]
    ) -> None:
        config = settings.service.leader_election
        timing = Timing(config.lease_duration, config.renew_deadline, config.retry_period)
        api = api_client(settings.service.kubeconfig, settings.service.kube_context, pool=2)
        self.elector = LeaseElector(
            RestApi(api),
            config.namespace or settings.namespace,
            config.lease_name,
            identity_of(config),
            timing,
        )
        self._lead, self._lost = lead, lost
        self._stop = threading.Event()
        #: Set while this replica holds the Lease.
        self.leading = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="runplane-leader-election", daemon=True
        )

    @property
    def identity(self) -> str:
        return self.elector.identity

    def start(self) -> None:
        log.info(
            "leader election: %s waits for lease %s/%s",
            self.identity,
            self.elector.namespace,
            self.elector.name,
        )
        self._thread.start()

    def _run(self) -> None:
        if not self.elector.acquire(self._stop):
            return
        self.leading.set()
        log.info("leader election: %s leads", self.identity)
        threading.Thread(target=self._leading, name="runplane-leader", daemon=True).start()
        if self.elector.renew(self._stop):
            return  # closing: close() releases the Lease once the service stopped
        self.leading.clear()
        self._lost()

    def _leading(self) -> None:
        try:
            self._lead()
        except Exception:  # a leader that cannot lead lets another try
            log.exception("leader election: %s could not start leading", self.identity)
            self._stop.set()
            self._thread.join(timeout=10)
            self._lost()
            self.leading.clear()
            self.elector.release()

    def close(self) -> None:
        """Stop renewing and give the Lease up (call once the service stopped controlling):
        another replica takes it at its next read, not after the Lease's duration."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self.leading.is_set():
            self.leading.clear()
            self.elector.release()
