"""Explicit contexts: ``npurt.Context``."""

from __future__ import annotations

from ._npurt import Context

__all__ = ["Context"]
