from fractions import Fraction

import pytest

from runplane.errors import InvalidValueError
from runplane.spec.quantity import (
    format_quantity,
    mebibytes,
    millicores,
    parse_quantity,
    resource_amount,
    unit_of,
    whole_bytes,
    whole_cores,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100m", Fraction(1, 10)),
        ("0.5", Fraction(1, 2)),
        ("2", Fraction(2)),
        ("1G", Fraction(10**9)),
        ("1Gi", Fraction(2**30)),
        ("512Mi", Fraction(512 * 2**20)),
        ("1e9", Fraction(10**9)),
        ("1E3", Fraction(1000)),
        ("128974848", Fraction(128974848)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("+1k", Fraction(1000)),
        ("2e-3", Fraction(2, 1000)),
        (1, Fraction(1)),
        (0.25, Fraction(1, 4)),
    ],
)
def test_kubernetes_quantities_parse_exactly(text, expected):
    assert parse_quantity("cpu", text) == expected


@pytest.mark.parametrize(
    "bad",
    [
        "1g",
        "1.5.5",
        "-1",
        "",
        "1 G",
        "G",
        "1Gb",
        "1e",
        "ten",
        -1,
        True,
        None,
        float("nan"),
        float("inf"),
        [1],
    ],
)
def test_invalid_quantities_name_field_value_and_examples(bad):
    with pytest.raises(InvalidValueError) as caught:
        parse_quantity("with_requests(mem=...)", bad, "memory")
    message = str(caught.value)
    assert message.startswith(f"with_requests(mem=...): {bad!r} is not valid")
    assert "example: mem='512Mi'" in message


def test_units_used_for_fit_round_up():
    assert millicores(parse_quantity("cpu", "0.0001")) == 1
    assert millicores(parse_quantity("cpu", "1.5")) == 1500
    assert whole_bytes(parse_quantity("memory", "1.5")) == 2


@pytest.mark.parametrize(
    ("name", "value", "amount"),
    [
        ("cpu", "0.0001", 1),
        ("cpu", "1.5", 1500),
        ("cpu", 0.25, 250),
        ("memory", "1.5", 2),
        ("memory", "1Gi", 2**30),
        ("hugepages-2Mi", "0.5", 1),
        ("ephemeral-storage", "1.5", 2),
        ("nvidia.com/gpu", "1.5", 1),
        ("nvidia.com/gpu", 2, 2),
        ("pods", "110", 110),
    ],
)
def test_resource_amounts_round_up_cpu_and_bytes_and_down_devices(name, value, amount):
    assert resource_amount(name, value) == amount


def test_whole_cores_round_up():
    assert [whole_cores(m) for m in (0, 1, 1000, 1001, 2500)] == [0, 1, 1, 2, 3]


def test_units_of_resources():
    assert [unit_of(n) for n in ("cpu", "memory", "hugepages-1Gi", "nvidia.com/gpu")] == [
        "millicores",
        "bytes",
        "bytes",
        "devices",
    ]


def test_mebibytes_round_to_nearest_for_display_and_up_for_what_a_run_is_given():
    assert mebibytes(512 * 2**20) == "512Mi"
    assert mebibytes(2**20 + 1) == "1Mi"
    assert mebibytes(2**20 + 1, up=True) == "2Mi"
    assert mebibytes(0.5 * 2**20) == f"{0.5:.0f}Mi"
    assert mebibytes(1, up=True) == "1Mi"


def test_format_keeps_what_was_written():
    assert format_quantity("1G") == "1G"
    assert format_quantity(2) == "2"
    assert format_quantity(2.0) == "2"
    assert format_quantity(0.5) == "0.5"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1Ei", 2**60),
        ("7Ei", 7 * 2**60),
        ("1E", 10**18),
        ("1E2", 100),
        ("9e18", 9 * 10**18),
        ("0e99999", 0),
        ("1e-100", Fraction(1, 10**9)),  # below 1n rounds up to it, as Kubernetes does
        ("0.0000001e25", 10**18),
    ],
)
def test_large_and_small_quantities_kubernetes_keeps(text, value):
    assert parse_quantity("mem", text, "memory") == value


@pytest.mark.parametrize(
    "bad", ["8Ei", "1e19", "1e400", "1e10000003", "9" * 30, "1" + "0" * 70, 1e300, 2**63]
)
def test_quantities_beyond_kubernetes_are_refused(bad):
    # Refused from the text alone: the exponent is never computed (no freeze on 1e10000003).
    with pytest.raises(InvalidValueError, match="at most 9223372036854775807"):
        parse_quantity("mem", bad, "memory")
