"""Failed authentication, rationed per client address so tokens cannot be guessed quickly.

Each address has a bucket of allowed failures: ``burst`` at first, refilled at ``rate`` a
second. A wrong token takes one; an address whose bucket is empty is answered 429 before its
token is even compared, valid or not, so a guess that happens to be right is no faster to find
than a wrong one. Successful requests take nothing, so users with their own valid tokens never
notice the throttle, and other addresses are never slowed by one that guesses.

A wrong token names nobody, so failures cannot be counted per user; IPv6 addresses are
counted per /64, the block one client usually holds. Behind a reverse proxy every connection
comes from the proxy: name it in ``service.trusted_proxies`` and the address counted is the
caller's, as the proxy forwarded it (:mod:`runplane.service.proxies`).
"""

from __future__ import annotations

import functools
import ipaddress
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

#: The most addresses remembered; the one that failed longest ago is forgotten first.
ADDRESSES = 10_000


class FailureThrottle:
    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._lock = threading.Lock()
        #: address → (failures still allowed, when that was counted)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def wait(self, address: str | None) -> float:
        """Seconds before ``address`` may authenticate again; 0 when it may now."""
        with self._lock:
            left = self._left(_key(address))
        return 0.0 if left >= 1 else (1 - left) / self.rate

    def failed(self, address: str | None) -> None:
        """Count one failed authentication from ``address``."""
        key = _key(address)
        with self._lock:
            self._buckets[key] = (self._left(key) - 1, self.clock())
            self._buckets.move_to_end(key)
            while len(self._buckets) > ADDRESSES:
                self._buckets.popitem(last=False)

    def _left(self, key: str) -> float:
        found = self._buckets.get(key)
        if found is None:
            return float(self.burst)
        left, since = found
        return min(float(self.burst), left + (self.clock() - since) * self.rate)


@functools.lru_cache(maxsize=4096)
def _key(address: str | None) -> str:
    """What ``address`` is counted as; kept for the addresses seen lately, since every
    request asks (parsing an address costs a tenth of the gate's time)."""
    if not address:
        return ""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:  # not an IP address (a Unix socket, a test client): as it is
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(parsed)


def retry_after(seconds: float) -> str:
    """``seconds`` as a ``Retry-After`` header value: whole seconds, at least one."""
    return str(max(1, int(seconds + 0.999)))
