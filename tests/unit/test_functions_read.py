"""A run's function sent again as the same JSON, by the same user, is read once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import runplane
from runplane.errors import InvalidValueError
from runplane.service.routes import submissions
from runplane.service.routes.submissions import FunctionsRead, RunSubmission
from runplane.spec import bounds


def _function(tmp_path: Path, **annotations: str) -> dict[str, Any]:
    path = tmp_path / "job.py"
    path.write_text("def handler(context):\n    return 1\n")
    fn = runplane.code_to_function("job", filename=str(path), handler="handler")
    fn.spec.annotations = annotations
    return fn.to_dict()


def _read(functions: FunctionsRead, function: dict[str, Any], user: str = "ana") -> Any:
    read = functions(None, RunSubmission(function=function), user)  # type: ignore[arg-type]
    if read.recorded is not None:  # its dict, made once
        assert orjson.loads(read.recorded) == read.function.to_dict()
    return read.function


def test_the_same_json_from_the_same_user_is_read_once(tmp_path: Path) -> None:
    functions = FunctionsRead()
    function = _function(tmp_path)
    first = _read(functions, function)
    assert first.to_dict() == function
    assert _read(functions, _function(tmp_path)) is first  # equal JSON, another dict
    assert _read(functions, function, "bo") is not first  # another user's is their own
    assert _read(functions, _function(tmp_path, team="a")) is not first


def test_values_equal_in_python_but_not_in_json_are_different_functions(tmp_path: Path) -> None:
    functions = FunctionsRead()
    whole, fraction = _function(tmp_path), _function(tmp_path)
    whole["spec"]["replicas"], fraction["spec"]["replicas"] = 1, 1.0
    assert _read(functions, whole) is not _read(functions, fraction)


def test_the_functions_kept_are_bounded_in_count_and_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    functions = FunctionsRead()
    oldest = _function(tmp_path, n="0")
    read = _read(functions, oldest)
    for n in range(1, submissions.FUNCTIONS_KEPT + 1):
        _read(functions, _function(tmp_path, n=str(n)))
    assert _read(functions, oldest) is not read  # forgotten first
    monkeypatch.setattr(submissions, "MAX_KEPT_FUNCTION_CHARS", 10)
    large = _function(tmp_path)
    assert _read(functions, large) is not _read(functions, large)


def test_a_function_refused_is_refused_again(tmp_path: Path) -> None:
    functions = FunctionsRead()
    bad = _function(tmp_path)
    bad["spec"]["replicas"] = "many"
    for _ in range(2):
        with pytest.raises(InvalidValueError, match="replicas"):
            _read(functions, bad)
    with pytest.raises(InvalidValueError, match="a function has kind, metadata and spec"):
        _read(functions, {"spec": {}})


def test_a_function_found_kept_is_not_walked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its depth and size were checked when it was read; an equal text is an equal value."""
    checked: list[dict[str, Any]] = []
    check = submissions._checked_text

    def counting(function: dict[str, Any], text: str | None = None) -> str:
        checked.append(function)
        return check(function, text)

    written: list[Any] = []
    plain = bounds.plain_json_text

    def writing(value: Any) -> str:
        written.append(value)
        return plain(value)

    monkeypatch.setattr(submissions, "_checked_text", counting)
    monkeypatch.setattr(submissions, "plain_json_text", writing)
    monkeypatch.setattr(bounds, "plain_json_text", writing)
    functions = FunctionsRead()
    first = _read(functions, _function(tmp_path))
    assert len(written) == 1  # its text made once, for the key and the check
    assert _read(functions, _function(tmp_path)) is first
    assert len(checked) == 1
    assert len(written) == 2
    deep: Any = "x"
    for _ in range(40):
        deep = [deep]
    too_deep = _function(tmp_path)
    too_deep["spec"]["env"] = deep
    for _ in range(2):  # refused by the check every time: never kept
        with pytest.raises(InvalidValueError, match="nest at most"):
            _read(functions, too_deep)
    assert len(checked) == 3
