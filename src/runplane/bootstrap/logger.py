"""The handler's logger, with the calls MLRun's has (fields as keywords, levels by name)."""

from __future__ import annotations

import json
import logging
import sys
import traceback

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class _Stdout(logging.StreamHandler):  # type: ignore[type-arg]  # not generic in 3.9
    """Writes to ``sys.stdout`` as it is when a line is logged (a notebook or a test may
    replace it after the logger was made)."""

    def __init__(self) -> None:
        super().__init__(sys.stdout)

    @property
    def stream(self) -> Any:
        return sys.stdout

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def stdout_logger(name: str) -> logging.Logger:
    """The logger ``name``, writing its own lines to standard output (once set up, as it is
    found again)."""
    logger = logging.getLogger(name)
    if not logger.handlers:
        handler = _Stdout()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


_LEVELS = {"debug": 10, "info": 20, "warn": 30, "warning": 30, "error": 40, "critical": 50}


class RunLogger:
    """The handler's logger: ``logger.info("msg", key=value)`` writes the message and its
    fields (as JSON), ``logger.info("epoch %d", 3)`` formats as ``logging`` does, and
    ``logger.debug(message=...)`` works as in MLRun."""

    def __init__(self, name: str) -> None:
        self._logger = stdout_logger(name)

    def _log(self, level: int, message: object, args: tuple[Any, ...], fields: Any) -> None:
        if not self._logger.isEnabledFor(level):
            return
        text = str(message) % args if args else str(message)
        if fields:
            text += " " + json.dumps(fields, default=str)
        self._logger.log(level, text)

    def debug(self, message: object = "", *args: Any, **fields: Any) -> None:
        self._log(logging.DEBUG, message, args, fields)

    def info(self, message: object = "", *args: Any, **fields: Any) -> None:
        self._log(logging.INFO, message, args, fields)

    def warning(self, message: object = "", *args: Any, **fields: Any) -> None:
        self._log(logging.WARNING, message, args, fields)

    warn = warning

    def error(self, message: object = "", *args: Any, **fields: Any) -> None:
        self._log(logging.ERROR, message, args, fields)

    def exception(self, message: object = "", *args: Any, **fields: Any) -> None:
        self._log(logging.ERROR, message, args, fields)
        self._logger.error("%s", traceback.format_exc().rstrip())

    def critical(self, message: object = "", *args: Any, **fields: Any) -> None:
        self._log(logging.CRITICAL, message, args, fields)

    def set_logger_level(self, level: str | int) -> None:
        """``"debug"``, ``"info"``, ... (any case) or a ``logging`` level number."""
        if isinstance(level, str):
            if level.lower() not in _LEVELS:
                raise ValueError(f"set_logger_level({level!r}): levels are " + ", ".join(_LEVELS))
            level = _LEVELS[level.lower()]
        self._logger.setLevel(level)

    setLevel = set_logger_level

    @property
    def level(self) -> int:
        return self._logger.level

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)
