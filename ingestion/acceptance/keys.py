"""Ingestion keys: read from the Authorization header or the body, and digested for the store."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping

from ingestion.acceptance.errors import RequestError


def digest_key(key: str) -> str:
    # surrogatepass: a key with a lone surrogate (from a JSON escape) matches no key, not a 500.
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def key_from_basic_header(header: str | None) -> str:
    """The ingestion key from `Basic <key>` or `Basic base64(<key>:)`."""
    if not header:
        raise RequestError(
            400,
            "missing_authorization",
            "Send the ingestion key in the header 'Authorization: Basic <API_KEY>'.",
        )
    if "," in header:  # what a server makes of two Authorization headers: a key holds no comma
        raise RequestError(
            400, "invalid_authorization", "Send one Authorization header, not several."
        )
    scheme, _, credential = header.strip().partition(" ")
    credential = credential.strip()
    if scheme.lower() != "basic" or not credential or " " in credential:
        raise RequestError(
            400,
            "invalid_authorization",
            "The Authorization header must be 'Basic <API_KEY>' or 'Basic base64(<API_KEY>:)'.",
        )
    try:
        decoded = base64.b64decode(credential, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return credential
    if ":" in decoded:
        user, _, _password = decoded.partition(":")
        if not user:
            raise RequestError(
                400, "invalid_authorization", "The Basic credential carries an empty key."
            )
        return user
    return credential


# The digest of the last few Authorization headers seen, so a busy sender's calls skip the
# base64 and the hash. Bounded in bytes: only headers of a usual length are remembered.
_CACHE_ENTRIES = 4096
_CACHE_HEADER_CHARS = 256
_header_digests: dict[str, str] = {}


def digest_from_basic_header(header: str | None) -> str:
    """`digest_key(key_from_basic_header(header))`, remembered for the next call."""
    digest = _header_digests.get(header) if header is not None else None
    if digest is None:
        digest = digest_key(key_from_basic_header(header))
        if len(header) <= _CACHE_HEADER_CHARS:  # type: ignore[arg-type]
            if len(_header_digests) >= _CACHE_ENTRIES:
                _header_digests.clear()
            _header_digests[header] = digest  # type: ignore[index]
    return digest


def key_from_body(data: Mapping) -> str:
    """The v1 key, from the body field `api_key`."""
    key = data.get("api_key")
    if key is None:
        raise RequestError(
            400,
            "missing_api_key",
            "Send the ingestion key in the body field 'api_key'.",
            {"api_key": ["This field is required."]},
        )
    if not isinstance(key, str) or not key.strip():
        raise RequestError(
            400,
            "invalid_api_key",
            "The body field 'api_key' must be a non-empty string.",
            {"api_key": ["Must be a non-empty string."]},
        )
    return key.strip()


def segment_key_digest(data: Mapping, authorization: str | None) -> str:
    """A Segment-family client's write key: from `Basic` (either form), else from `writeKey` in
    the body. Without one the answer is 401: retrying cannot fix it."""
    error: RequestError | None = None
    if authorization:
        try:
            return digest_from_basic_header(authorization)
        except RequestError as exc:
            error = exc
    write_key = data.get("writeKey")
    if isinstance(write_key, str) and write_key.strip():
        return digest_key(write_key.strip())
    if error is not None:
        raise RequestError(401, error.code, error.message)
    raise RequestError(
        401,
        "missing_authorization",
        "Send the write key as 'Authorization: Basic base64(<KEY>:)' or as 'writeKey' in the body.",
    )
