"""`{% load money %}{{ cost|usd }}`: core/money.py's one cost format in templates."""

from __future__ import annotations

from django import template

from core.money import usd as format_usd

register = template.Library()


@register.filter
def usd(value) -> str:
    if value in ("", None):
        return format_usd(None)
    try:
        return format_usd(value)
    except (TypeError, ValueError):
        return format_usd(None)
