"""How long to wait before trying again: capped, jittered exponential steps, shared by the
retried requests, the watch loop and the log copies."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    initial: float = 0.5
    maximum: float = 30.0

    def delay(self, failures: int) -> float:
        """Full jitter around an exponential step, so many watchers do not retry in lockstep."""
        step = min(self.maximum, self.initial * 2 ** max(failures - 1, 0))
        return random.uniform(step / 2, step)
