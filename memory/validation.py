"""Value checks shared by the tool, the REST API, the panel and admin. Limits come from settings."""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.utils.dateparse import parse_datetime

from . import clock
from .errors import invalid


def _refuse_nul(value: str, name: str) -> str:
    # PostgreSQL text cannot hold NUL; refuse it as bad input instead of failing in the database.
    if "\x00" in value:
        raise invalid(f"{name} contains a NUL character.", f"Remove the NUL (\\u0000) characters from {name}.")
    return value


def clean_content(value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid("content must be a non-empty string.", "Pass the fact to store as `content`.")
    _refuse_nul(value, "content")
    limit = settings.MEMORY_CONTENT_MAX_BYTES
    if len(value.encode("utf-8")) > limit:
        raise invalid(
            f"content is longer than {limit} bytes.",
            f"Store a shorter summary (at most {limit} bytes of UTF-8) or split it into several memories.",
            code="content_too_long",
        )
    return value


def _clean_label(value, *, name: str, limit: int, hint: str) -> str:
    """An optional short text (a title, a category): "" when absent, trimmed, at most `limit` characters."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise invalid(f"{name} must be a string.", hint)
    value = _refuse_nul(value, name).strip()
    if len(value) > limit:
        raise invalid(f"{name} is longer than {limit} characters.", f"Use at most {limit} characters.", code="too_long")
    return value


def clean_title(value) -> str:
    return _clean_label(
        value, name="title", limit=settings.MEMORY_TITLE_MAX_CHARS, hint="Pass a short title, or leave it out."
    )


def clean_category(value) -> str:
    return _clean_label(
        value,
        name="category",
        limit=settings.MEMORY_CATEGORY_MAX_CHARS,
        hint="Use one short word such as `preference` or `decision`.",
    )


def clean_tags(value) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list | tuple) or not all(isinstance(tag, str) for tag in value):
        raise invalid("tags must be a list of strings.", 'Pass tags like ["billing", "acme"].')
    tags: list[str] = []
    for raw in value:
        tag = _refuse_nul(raw, "tags").strip()
        if not tag:
            raise invalid("tags may not be empty strings.", "Drop the empty tag.")
        if len(tag) > settings.MEMORY_TAG_MAX_CHARS:
            raise invalid(
                f"a tag is longer than {settings.MEMORY_TAG_MAX_CHARS} characters.",
                f"Keep each tag at most {settings.MEMORY_TAG_MAX_CHARS} characters.",
                code="too_long",
            )
        if tag not in tags:
            tags.append(tag)
    if len(tags) > settings.MEMORY_TAGS_MAX:
        raise invalid(
            f"more than {settings.MEMORY_TAGS_MAX} tags.",
            f"Use at most {settings.MEMORY_TAGS_MAX} tags.",
            code="too_many_tags",
        )
    return tags


def clean_filter_list(value, *, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise invalid(f"{name} must be a list of strings.", f'Pass {name} like ["preference"].')
    cleaned = [_refuse_nul(v, name).strip() for v in value if v.strip()]
    if len(cleaned) > max(settings.MEMORY_TAGS_MAX, 20):
        raise invalid(f"too many {name}.", f"Filter on at most {max(settings.MEMORY_TAGS_MAX, 20)} values.")
    return cleaned


def clean_expires_at(value, *, now: datetime | None = None) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = parse_datetime(value.strip())
        except ValueError:
            parsed = None
        if parsed is None:
            raise invalid(
                "expires_at is not an ISO 8601 date-time.",
                "Use a date-time like 2027-01-31T00:00:00Z, or leave it out for a memory that does not expire.",
            )
    else:
        raise invalid("expires_at must be a string.", "Use a date-time like 2027-01-31T00:00:00Z.")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    if parsed <= (now or clock.now()):
        raise invalid("expires_at is in the past.", "Give a future date-time, or forget the memory instead.")
    return parsed


def clean_limit(value) -> int:
    if value is None:
        return settings.MEMORY_LIMIT_DEFAULT
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        else:
            raise invalid("limit must be an integer.", f"Use 1 to {settings.MEMORY_LIMIT_MAX}.")
    if value < 1 or value > settings.MEMORY_LIMIT_MAX:
        raise invalid(f"limit must be between 1 and {settings.MEMORY_LIMIT_MAX}.", "Page with `cursor` for more.")
    return value


def clean_query(value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid("query must be a non-empty string.", "Describe what you are looking for in a few words.")
    _refuse_nul(value, "query")
    if len(value) > settings.MEMORY_QUERY_MAX_CHARS:
        raise invalid(
            f"query is longer than {settings.MEMORY_QUERY_MAX_CHARS} characters.",
            "Use a few keywords.",
            code="too_long",
        )
    return value.strip()


def clean_id(value, *, name: str = "memory_id") -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value > 2**63 - 1:
        raise invalid(f"{name} must be a positive integer id.", "Use an id returned by remember, recall or list.")
    return value


def clean_version(value) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value > 2**31 - 1:
        raise invalid(
            "expected_version must be a positive integer.",
            "Pass the `version` you last read for this memory (get returns it).",
        )
    return value


PATCH_FIELDS = ("content", "title", "category", "tags", "expires_at")


def clean_patch(value) -> dict:
    if not isinstance(value, dict) or not value:
        raise invalid("patch must be an object with at least one field.", f"Patch any of: {', '.join(PATCH_FIELDS)}.")
    unknown = sorted(set(value) - set(PATCH_FIELDS))
    if unknown:
        raise invalid(f"patch has unknown fields: {', '.join(unknown)}.", f"Patch only: {', '.join(PATCH_FIELDS)}.")
    cleaned: dict = {}
    if "content" in value:
        cleaned["content"] = clean_content(value["content"])
    if "title" in value:
        cleaned["title"] = clean_title(value["title"])
    if "category" in value:
        cleaned["category"] = clean_category(value["category"])
    if "tags" in value:
        cleaned["tags"] = clean_tags(value["tags"])
    if "expires_at" in value:
        # null clears the expiry
        cleaned["expires_at"] = clean_expires_at(value["expires_at"])
    return cleaned
