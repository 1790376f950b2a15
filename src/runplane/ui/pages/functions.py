"""(filled in below)"""

from __future__ import annotations

from fastapi import APIRouter

from runplane.ui.web import UI


def router(ui: UI) -> APIRouter:
    return APIRouter()
