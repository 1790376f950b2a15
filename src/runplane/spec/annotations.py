"""Code annotations: which parts of a notebook or file are a function's code.

``# mlrun: start-code`` and ``# mlrun: end-code`` (or ``# runplane: ...``) enclose the code; a
name after them (``# mlrun: start-code my-function``) ties the section to the function of that
name, and when no section carries the function's name the unnamed ones are used. A start
without an end runs to the end of the code, an end without a start from its beginning.
``# mlrun: ignore`` leaves out its notebook cell, or in a file its own line.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from runplane.errors import InvalidValueError

_MARK = re.compile(
    r"^\s*#\s*(?:mlrun|runplane|nuclio)\s*:\s*(start-code|end-code|ignore)\b\s*(\S*)\s*$",
    re.IGNORECASE,
)
_TRAILING_IGNORE = re.compile(r"#\s*(?:mlrun|runplane|nuclio)\s*:\s*ignore\s*$", re.IGNORECASE)


def _mark(line: str) -> tuple[str, str] | None:
    found = _MARK.match(line)
    return (found.group(1).lower(), found.group(2)) if found else None


def has_markers(code: str) -> bool:
    return any(_mark(line) or _TRAILING_IGNORE.search(line) for line in code.splitlines())


def kept_cells(cells: Iterable[str]) -> list[str]:
    """Notebook cells without those marked ``# mlrun: ignore``."""
    return [
        cell
        for cell in cells
        if not any((_mark(line) or ("", ""))[0] == "ignore" for line in cell.splitlines())
    ]


def select_code(code: str, name: str = "") -> str:
    """The part of ``code`` that is the function ``name``'s (all of it without sections)."""
    lines = [
        line
        for line in code.splitlines()
        if not _TRAILING_IGNORE.search(line) or _mark(line) is not None
    ]
    lines = [line for line in lines if (_mark(line) or ("", ""))[0] != "ignore"]
    marks = [(index, _mark(line)) for index, line in enumerate(lines)]
    sections = [(index, mark) for index, mark in marks if mark is not None]
    labels = {label for _, (_, label) in sections}
    wanted = name if name and name in labels else ""
    relevant = [(index, kind) for index, (kind, label) in sections if label == wanted]
    if not relevant:
        return "\n".join(line for line in lines if _mark(line) is None) + "\n"
    chunks: list[list[str]] = []
    start: int | None = 0 if relevant[0][1] == "end-code" else None
    for index, kind in relevant:
        if kind == "start-code" and start is None:
            start = index + 1
        elif kind == "end-code" and start is not None:
            chunks.append(lines[start:index])
            start = None
    if start is not None:
        chunks.append(lines[start:])
    kept = [line for chunk in chunks for line in chunk if _mark(line) is None]
    return "\n".join(kept) + "\n"


def code_names(code: str) -> set[str]:
    """The top-level names ``code`` defines (functions and classes)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }


def definitions(source: str) -> str:
    """The statements of ``source`` that define things: imports, functions, classes, and
    assignments of literal values (the last definition of a name wins, as when it runs)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise InvalidValueError(
            "code", source[:80], f"the code must be valid Python ({error.msg})"
        ) from None
    lines = source.splitlines()
    kept: list[str] = []
    for node in tree.body:
        if _defines(node):
            start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            kept.append("\n".join(lines[start - 1 : node.end_lineno]))
    return "\n\n".join(kept) + "\n"


def _defines(node: ast.stmt) -> bool:
    if isinstance(
        node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    ):
        return True
    if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
        try:
            ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
        return True
    return False
