import pytest

from runplane.errors import InvalidValueError
from runplane.spec.labels import check_label_key, check_label_value, check_labels


@pytest.mark.parametrize(
    "key", ["app", "app.iguazio.com/lifecycle", "a_b.c-d", "x/y", "kubernetes.io/hostname", "A1"]
)
def test_valid_label_keys(key):
    assert check_label_key("node_selector key", key) == key


@pytest.mark.parametrize(
    "key",
    ["", "/x", "x/", "-a", "a-", "UPPER.com/x", "a b", "a/b/c", "x" * 64, "p" * 254 + "/x", 5],
)
def test_invalid_label_keys(key):
    with pytest.raises(InvalidValueError) as caught:
        check_label_key("node_selector key", key)
    assert "a label key is an optional DNS-subdomain prefix" in str(caught.value)


@pytest.mark.parametrize("value", ["", "preemptible", "a.b_c-d", "x" * 63])
def test_valid_label_values(value):
    assert check_label_value("v", value) == value


@pytest.mark.parametrize("value", ["-x", "x-", "a b", "x" * 64, 1, None])
def test_invalid_label_values(value):
    with pytest.raises(InvalidValueError, match="a label value is at most 63 characters"):
        check_label_value("node_selector['k']", value)


def test_labels_must_be_a_mapping():
    with pytest.raises(InvalidValueError, match="a mapping of label keys to values"):
        check_labels("node_selector", ["a=b"])
