"""Strict readers for settings that come from the environment.

A typo in a deployment variable must stop the process at start-up, not surface later as a
surprising default, so every helper refuses values it cannot parse.
"""

import os


class ImproperlyConfiguredEnv(RuntimeError):
    pass


def env_str(name: str, default: str | None = None, *, required: bool = False) -> str | None:
    value = os.environ.get(name)
    if value is None or value == "":
        if required:
            raise ImproperlyConfiguredEnv(f"environment variable {name} is required")
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfiguredEnv(f"{name} must be a boolean (1/0, true/false, yes/no, on/off), got {value!r}")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        result = default
    else:
        try:
            result = int(value.strip())
        except ValueError:
            raise ImproperlyConfiguredEnv(f"{name} must be an integer, got {value!r}") from None
    if minimum is not None and result < minimum:
        raise ImproperlyConfiguredEnv(f"{name} must be >= {minimum}, got {result}")
    if maximum is not None and result > maximum:
        raise ImproperlyConfiguredEnv(f"{name} must be <= {maximum}, got {result}")
    return result


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return float(value.strip())
    except ValueError:
        raise ImproperlyConfiguredEnv(f"{name} must be a number, got {value!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return list(default)
    return [part.strip() for part in value.split(",") if part.strip()]


def env_secret(name: str, *, dev_default: str | None, allow_default: bool) -> str:
    """A secret must be set in production; development may fall back to a per-data-dir value."""
    value = os.environ.get(name)
    if value:
        if len(value) < 32:
            raise ImproperlyConfiguredEnv(f"{name} must be at least 32 characters long")
        return value
    if allow_default and dev_default:
        return dev_default
    raise ImproperlyConfiguredEnv(f"environment variable {name} is required when DEBUG is off")
