"""Numbers and text as users write them: one reading of a whole number (ASCII digits,
bounded), Kubernetes' quantity grammar in ASCII, and no lone surrogate in any string."""

from __future__ import annotations

import json

import pytest

from runplane.errors import InvalidValueError
from runplane.spec.bounds import (
    check_json,
    check_text,
    check_unicode,
    escape_surrogates,
    load_json,
)
from runplane.spec.handler import bind_parameters, read_signature
from runplane.spec.numbers import is_whole, whole_number
from runplane.spec.quantity import parse_quantity
from runplane.spec.resources import check_gpu_count
from runplane.spec.run_options import RunOptions
from runplane.spec.scheduling import check_affinity

#: Digits Python's int() and re's \d take, and Kubernetes (and runplane) do not.
OTHER_DIGITS = ["\u0661\u0662\u0668", "\uff12\uff15\uff16", "\u00b2", "\u0663"]


@pytest.mark.parametrize(
    ("text", "number"), [("0", 0), ("42", 42), ("+7", 7), ("-3", -3), (" 12 ", 12), ("007", 7)]
)
def test_whole_numbers_in_ascii_digits(text, number):
    assert whole_number("n", text, -10, 100) == number


@pytest.mark.parametrize(
    "text",
    [*OTHER_DIGITS, "", "1_0", "0x10", "1.0", "1e3", "12\n", "9" * 5000, "101", "-11"],
)
def test_anything_else_is_refused_naming_the_field_and_the_range(text):
    with pytest.raises(InvalidValueError) as refused:
        whole_number("gpu_limit", text, -10, 100, "4")
    message = str(refused.value)
    assert message.startswith("gpu_limit: ")
    assert "a whole number from -10 to 100, in ASCII digits (example: 4)" in message
    assert len(message) < 400  # a value of thousands of digits is cut short


def test_is_whole_is_the_one_grammar():
    assert is_whole("-12")
    assert not any(is_whole(text) for text in [*OTHER_DIGITS, " 1", "1\n", "", "+"])


def test_ints_pass_bools_do_not():
    assert whole_number("n", 5, 0, 9) == 5
    with pytest.raises(InvalidValueError):
        whole_number("n", True, 0, 9)


@pytest.mark.parametrize("gpus", ["\u00b2", "9" * 5000, "\u0661", "1.5", -1, 4097])
def test_gpu_counts_from_text_are_ascii_and_bounded(gpus):
    with pytest.raises(InvalidValueError, match="GPUs are a whole number from 0 to 4096"):
        check_gpu_count("gpu_limit", gpus)
    assert check_gpu_count("gpu_limit", "2") == 2


@pytest.mark.parametrize("value", [*OTHER_DIGITS, "9" * 5000, "1_000"])
def test_int_parameters_converted_from_text_are_ascii(value):
    code = "def train(context, epochs: int = 1):\n    pass\n"
    with pytest.raises(InvalidValueError, match="the handler expects int"):
        bind_parameters(read_signature(code, "train"), {"epochs": value})
    assert bind_parameters(read_signature(code, "train"), {"epochs": "-12"}) == {"epochs": -12}


@pytest.mark.parametrize("value", ["\u00b2", "\u0661", "9" * 30])
def test_affinity_gt_takes_an_int64_in_ascii(value):
    term = {"matchExpressions": [{"key": "gpu-count", "operator": "Gt", "values": [value]}]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    with pytest.raises(InvalidValueError, match="takes one integer value"):
        check_affinity("affinity", affinity)


@pytest.mark.parametrize(
    "text",
    [d + "Mi" for d in OTHER_DIGITS]
    + ["128Mi\n", "1\n", "1e3\n", "\u0661e3", "1e\u0663", "0.\u0665"],
)
def test_quantities_are_kubernetes_grammar_in_ascii(text):
    with pytest.raises(InvalidValueError) as refused:
        parse_quantity("spec.resources.limits.memory", text, "memory")
    assert str(refused.value).startswith("spec.resources.limits.memory: ")
    assert "ASCII digits" in str(refused.value)


LONE = "x\ud800y"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"params": {"x": "x\\ud800y"}}', "params.x"),
        ('{"params": {"x": [1, {"y": "\\udfff"}]}}', "params.x[1].y"),
        ('{"a": {"\\udc00": 1}}', "a.\\udc00"),
        (b'{"raw": "\xed\xa0\x80"}', "raw"),
    ],
)
def test_a_body_with_a_lone_surrogate_is_refused_naming_where(text, field):
    with pytest.raises(InvalidValueError) as refused:
        load_json(text)
    assert refused.value.field == field
    assert "lone UTF-16 surrogate" in str(refused.value)
    str(refused.value).encode()  # the message itself is text any encoder writes


def test_pairs_and_escaped_backslashes_are_text():
    assert load_json('{"e": "\\ud83d\\ude00"}') == {"e": "\U0001f600"}
    assert load_json('{"e": "\\\\ud800"}') == {"e": "\\ud800"}


def test_text_checks_refuse_lone_surrogates():
    with pytest.raises(InvalidValueError, match="env X"):
        check_text("env X", LONE, 100, "'v'")
    with pytest.raises(InvalidValueError, match=r"function\.spec\.args\[0\]"):
        check_json("function", {"spec": {"args": [LONE]}}, 1000, "{}")
    with pytest.raises(InvalidValueError, match=r"inputs\.data"):
        RunOptions(inputs={"data": LONE})
    with pytest.raises(InvalidValueError, match=r"state_thresholds\."):
        RunOptions(state_thresholds={LONE: "1h"})
    assert check_unicode("params", {"x": ["caf\u00e9", 1, None]}) == {"x": ["caf\u00e9", 1, None]}


def test_stored_surrogates_come_back_escaped():
    from runplane.service.db import stored_json

    stored = json.dumps({"x": LONE, LONE: [LONE, 1], "fine": "caf\u00e9"})
    value = stored_json(stored)
    assert value == {"x": "x\\ud800y", "x\\ud800y": ["x\\ud800y", 1], "fine": "caf\u00e9"}
    json.dumps(value, ensure_ascii=False).encode()  # encodes now
    assert stored_json(stored.encode()) == value  # as PostgreSQL's driver hands it over
    plain = {"x": [1, "two"]}
    assert stored_json(json.dumps(plain)) == plain
    assert escape_surrogates(plain) == plain


@pytest.mark.parametrize(
    "value",
    [
        {"x": 10**30, "y": -(10**25), "z": 2**64 - 1, "w": -(2**63)},
        {"params": {"seed": int("9" * 4300)}, "rate": 0.1234567890123456789},
        {"text": "caf\u00e9 \U0001f600", "nested": [[{"a": None, "b": True}]], "f": 1.0},
        {"1": "a key that was a number", "e": 1e300, "tiny": 5e-324},
    ],
)
def test_a_stored_value_reads_back_as_it_was_written(value):
    # orjson writes and reads most values; it reads an integer beyond 64 bits as a float, so
    # such text (a parameter of 30 digits, which a run may take) is read exactly instead.
    from runplane.service.db import stored_json, stored_text

    stored = stored_text(value)
    assert stored_json(stored) == value
    assert stored_json(stored.encode()) == value
    assert json.dumps(stored_json(stored)) == json.dumps(value)  # ints stay ints
    assert json.loads(stored) == value  # what is written is JSON any reader takes


@pytest.mark.parametrize("given", ["\u0661", "1_0", "nan", "inf", " 60", "60\n", "1e99999", "0"])
def test_an_invoke_timeout_is_seconds_in_ascii(given):
    from runplane.service.routes.deployments import _invoke_timeout

    with pytest.raises(InvalidValueError, match="X-Runplane-Timeout"):
        _invoke_timeout(given)
    assert _invoke_timeout("0.5") == 0.5
    assert _invoke_timeout("600") == 600.0
