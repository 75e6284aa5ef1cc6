"""Small strict readers for settings that come from environment variables.

An empty value means "use the default", for every reader: `.env.example` loaded verbatim
(`set -a; . ./.env`, docker `--env-file`, systemd `EnvironmentFile`) sets many variables to "",
and those must behave exactly as if they were not set at all.
"""

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _raw(name: str) -> str | None:
    """The variable's value, or None when it is unset or empty (blank)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    return raw


def load_env_file(path: Path) -> None:
    """Read KEY=VALUE lines from `path` (a `.env`) into the environment, below it: a variable the
    process already has, even an empty one, keeps its value. So `NAME=value make run` (or any
    command) always wins over the file. A missing file is no error."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise ImproperlyConfigured(f"{path}:{number}: expected NAME=value, got {line!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        os.environ.setdefault(name, value)


def env_str(name: str, default: str) -> str:
    raw = _raw(name)
    return default if raw is None else raw.strip()


def env_bool(name: str, default: bool) -> bool:
    raw = _raw(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    return _env_number(name, default, int, "an integer", minimum)


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    return _env_number(name, default, _finite_float, "a finite number", minimum)


def _finite_float(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(raw)
    return value


Number = TypeVar("Number", int, float)


def _env_number(
    name: str, default: Number, parse: Callable[[str], Number], kind: str, minimum: Number | None
) -> Number:
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = parse(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be {kind}, got {raw!r}") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = _raw(name)
    if raw is None:
        return default
    items = [item.strip() for item in raw.split(",") if item.strip()]
    return items or default


def env_int_list(name: str, default: list[int]) -> list[int]:
    """Comma-separated whole numbers (>= 0), e.g. a retry schedule in seconds."""
    raw = _raw(name)
    if raw is None:
        return default
    try:
        values = [int(part) for part in raw.split(",") if part.strip()]
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be comma-separated whole numbers") from None
    if not values or min(values) < 0:
        raise ImproperlyConfigured(f"{name} must list at least one number, none negative")
    return values


def env_path(name: str, default: Path, *, base_dir: Path) -> Path:
    """A directory; a relative value is taken from the project directory, not from wherever the
    process happened to start."""
    raw = _raw(name)
    path = default if raw is None else Path(raw.strip()).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    return path.resolve()


def env_secret(name: str, *, production: bool, embedded_default: str) -> str:
    """A secret: required in production, a fixed development value otherwise."""
    raw = _raw(name)
    if raw is not None:
        return raw.strip()
    if production:
        raise ImproperlyConfigured(
            f"{name} is required when DJANGO_ENV=production; see .env.example"
        )
    return embedded_default


def check_static_root(static_root: Path, *, base_dir: Path, data_dir: Path) -> None:
    """Static files are served to anyone: their root must never be (or contain) the project
    directory, where `.env` and the code live, nor the data directory, where the SQLite file is."""
    root = static_root.resolve()
    for label, directory in (("the project directory", base_dir), ("DATA_DIR", data_dir)):
        directory = directory.resolve()
        if root == directory or root in directory.parents:
            raise ImproperlyConfigured(
                f"STATIC_ROOT {str(root)!r} is {label} ({str(directory)!r}) or a parent of it: "
                "every file under it would be served at /static/. Point STATIC_ROOT at a "
                "directory of its own (default DATA_DIR/static)."
            )


def proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """SECURE_PROXY_SSL_HEADER from a header name such as X-Forwarded-Proto: a request that
    carries `<header>: https` (set by the TLS-terminating proxy) is secure. Empty: no proxy."""
    raw = _raw(name)
    if raw is None:
        return None
    header = raw.strip()
    if not all(part.isalnum() for part in header.split("-")):
        raise ImproperlyConfigured(
            f"{name} must be a header name such as X-Forwarded-Proto, got {raw!r}"
        )
    return "HTTP_" + header.upper().replace("-", "_"), "https"


_RATE_PERIODS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60}
_RATE_PERIODS |= {"h": 3600, "hour": 3600, "d": 86400, "day": 86400}


def env_rate(name: str, default: str) -> str:
    """A rate such as `100/second` (or /minute, /hour, /day; DRF's form), checked; `off`: ""."""
    raw = env_str(name, default).strip()
    if raw.lower() == "off":
        return ""
    count, _, period = raw.partition("/")
    if not count.isdigit() or int(count) < 1 or period not in _RATE_PERIODS:
        raise ImproperlyConfigured(
            f"{name} must look like {default if default != 'off' else '100/second'} "
            f"(a count per second, minute, hour or day), or off; got {raw!r}"
        )
    return raw


def rate_parts(rate: str) -> tuple[int, int]:
    """A checked rate as (requests, window in seconds)."""
    count, _, period = rate.partition("/")
    return int(count), _RATE_PERIODS[period]
