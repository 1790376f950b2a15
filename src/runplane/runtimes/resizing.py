"""What every runtime says of a resize in place, in the same words."""

from __future__ import annotations

from runplane.runs import ResizeRecord
from runplane.spec.quantity import mebibytes


def millicores(amount: int | None) -> str:
    return "unlimited" if amount is None else f"{amount}m"


def memory(amount: int | None) -> str:
    return "unlimited" if amount is None else mebibytes(amount)


def described(record: ResizeRecord) -> str:
    """A resize in words, for the run's status text."""
    parts = []
    if record.memory_to != record.memory_from:
        parts.append(f"memory {memory(record.memory_from)} → {memory(record.memory_to)}")
    if record.cpu_to != record.cpu_from:
        parts.append(f"CPU {millicores(record.cpu_from)} → {millicores(record.cpu_to)}")
    who = "right-sized" if record.mode == "auto" else f"resized by {record.by or 'a person'}"
    return f"{who} in place: {', '.join(parts)} ({record.why})"
