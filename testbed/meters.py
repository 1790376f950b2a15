"""What a runplane service counted (its ``/api/v1/metrics``), and what that comes to per run.

The counts (:mod:`runplane.meters`) do not depend on the machine's speed, so a budget on them
holds on any machine: the CI test asserts them, the service benchmark prints them.
"""

from __future__ import annotations

from collections import Counter

import httpx
from prometheus_client.parser import text_string_to_metric_families

Counts = Counter[str]


def scrape(url: str, token: str) -> Counts:
    """Each ``runplane_*`` counter of the service at ``url`` (its base, without ``/api/v1``),
    keyed ``meter`` and ``meter{label=value,...}`` (a meter's total and each label set)."""
    answer = httpx.get(
        f"{url}/api/v1/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    answer.raise_for_status()
    counts: Counts = Counter()
    for family in text_string_to_metric_families(answer.text):
        if not family.name.startswith("runplane_"):
            continue
        meter = family.name.removeprefix("runplane_")
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()) if v)
            counts[meter] += int(sample.value)
            if labels:
                counts[f"{meter}{{{labels}}}"] += int(sample.value)
    return counts


def per_run(before: Counts, after: Counts, runs: int) -> dict[str, float]:
    """What the service counted between two scrapes, per run, each rounded to 0.01."""
    spent = {key: after[key] - before[key] for key in sorted(after)}
    return {key: round(n / runs, 2) for key, n in spent.items() if n}
