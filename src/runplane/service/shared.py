"""What the run service's parts share: the recorder, the launcher and the monitor each act on
the same store, runtime and runs held in memory, under settings an admin may change while
they run (one object, so a change reaches all three at once)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from runplane.config import Settings
from runplane.runtimes.contract import Runtime
from runplane.service.feed import RunFeed
from runplane.service.live import LiveRuns
from runplane.service.records import RunStore


@dataclass(slots=True)
class Shared:
    settings: Settings
    store: RunStore
    runtime: Runtime
    live: LiveRuns = field(default_factory=LiveRuns)
    #: Uids of runs as their records change, for live clients.
    feed: RunFeed = field(default_factory=RunFeed)
    #: Aborts on a cluster are API calls: they run beside the recorder and the monitor. A
    #: burst of threshold breaches is aborted at once rather than in turns: each abort waits
    #: on two writes (the reason, the delete) that the API server and etcd take together far
    #: faster than one after another, and a breach is recorded only when its abort begins.
    aborts: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(
            max_workers=32, thread_name_prefix="runplane-abort"
        )
    )
