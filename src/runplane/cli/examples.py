"""The example every command's ``--help`` ends with (its epilog), kept on one line as typed:
click re-wraps help paragraphs, which would break a command line across lines."""

from __future__ import annotations


def example(*lines: str) -> str:
    """An epilog of command lines, each shown as it is (click's ``\\b`` keeps a paragraph
    unwrapped)."""
    return "\b\nExample:\n" + "\n".join(f"  {line}" for line in lines)
