"""``/metrics``: the service's counts of work (:mod:`runplane.meters`) and its process's CPU
and memory, in Prometheus's text format, for admins (a scrape sends an admin's token)."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter, Response

from runplane import meters
from runplane.service.routes.context import Admin

router = APIRouter()


class _Meters:
    """Each meter as a Prometheus counter family, read when scraped."""

    def collect(self) -> Iterator[object]:
        from prometheus_client.core import CounterMetricFamily

        counted = meters.counts()
        for name, help_text in meters.METERS.items():
            found = {labels: n for (meter, labels), n in counted.items() if meter == name}
            names = sorted({key for labels in found for key, _ in labels})
            family = CounterMetricFamily(f"runplane_{name}", help_text, labels=names)
            for labels, n in sorted(found.items()):
                values = dict(labels)
                family.add_metric([values.get(key, "") for key in names], n)
            yield family


@router.get("/metrics", response_class=Response)
def metrics(_: Admin) -> Response:
    # Imported here: only a scrape pays for the client library, not every start of the API.
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    from prometheus_client.process_collector import ProcessCollector

    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    registry.register(_Meters())  # type: ignore[arg-type]
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
