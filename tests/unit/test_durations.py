import pytest

from runplane.errors import InvalidValueError
from runplane.spec.durations import NEVER, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1h", 3600),
        ("24h", 86400),
        ("1 min", 60),
        ("1 minute and 30s", 90),
        ("30 minutes 5h 1day", 30 * 60 + 5 * 3600 + 86400),
        ("1h30m", 5400),
        ("2 hours, 15 mins", 8100),
        ("1.5h", 5400),
        ("1 week", 604800),
        ("10 Seconds", 10),
        ("-1", NEVER),
        (-1, NEVER),
    ],
)
def test_time_strings(text, seconds):
    assert parse_duration("running", text) == seconds


@pytest.mark.parametrize(
    "bad", ["", "1", "1 fortnight", "soon", "and", "0s", "1h and", "-5m", 0, 5, None, True, "h1"]
)
def test_unparseable_time_strings_are_refused(bad):
    with pytest.raises(InvalidValueError) as caught:
        parse_duration("state_thresholds['running']", bad)
    assert "state_thresholds['running']" in str(caught.value)
    assert "example: '1h'" in str(caught.value)


def test_a_text_read_again_or_long_gives_the_same_and_a_refusal_names_each_field():
    long = "1s " * 40  # longer than the texts whose reading is kept
    assert parse_duration("pending", long) == parse_duration("running", long) == 40
    assert parse_duration("pending", "2h") == parse_duration("running", "2h") == 7200
    for field in ("pending", "running"):  # a refusal is not kept with the first field's name
        with pytest.raises(InvalidValueError, match=f"{field}.*longer than zero"):
            parse_duration(field, "0s")
