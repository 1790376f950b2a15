"""Bad API input answers 4xx, never 5xx: every operation of the published OpenAPI, fuzzed."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings

from runplane.service.api import create_app

from .conftest import ADMIN


def test_no_operation_answers_a_server_error(server):
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(server))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    failures = []
    statuses: list[int] = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=25,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case):
            response = case.call(headers=ADMIN)
            statuses.append(response.status_code)
            if response.status_code >= 500:
                failures.append(
                    (
                        case.method,
                        case.formatted_path,
                        case.body,
                        response.status_code,
                        response.text[:300],
                    )
                )

        check()
    assert failures == []
    assert len(statuses) >= 10 * len(operations)  # the fuzzer really called every operation
    assert any(400 <= status < 500 for status in statuses)
