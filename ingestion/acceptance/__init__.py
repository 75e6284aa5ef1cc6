"""The acceptance rules, free of any web framework: the ingestion door (ingestion/asgi.py) feeds
a request in here and gets back what to store and how to answer, or a `RequestError` to render.

One definition of each rule:
`http` (path, header and framing limits), `body` (gzip, JSON), `keys` (ingestion keys),
`fields` (identifiers, traits, times), `messages` (each call and Segment message),
`endpoints` (what each endpoint takes, the batch loop, `accept`).
"""

from ingestion.acceptance.body import messages_json, parse_json_object, read_body
from ingestion.acceptance.endpoints import (
    BATCH,
    CALL,
    ENDPOINTS,
    SEGMENT,
    Accepted,
    Endpoint,
    Limits,
    Outcome,
    accept,
    body_limit,
)
from ingestion.acceptance.errors import RequestError, too_large
from ingestion.acceptance.fields import parse_timestamp_ms
from ingestion.acceptance.keys import digest_key, key_from_basic_header
from ingestion.acceptance.messages import (
    DROP,
    DROP_ANONYMOUS,
    DROP_INVALID_MESSAGE,
    DROP_TIMESTAMP_IN_FUTURE,
    DROP_UNSUPPORTED_TYPE,
    drop_marker,
    is_drop,
    segment_message,
)

__all__ = [
    "BATCH",
    "CALL",
    "DROP",
    "DROP_ANONYMOUS",
    "DROP_INVALID_MESSAGE",
    "DROP_TIMESTAMP_IN_FUTURE",
    "DROP_UNSUPPORTED_TYPE",
    "ENDPOINTS",
    "SEGMENT",
    "Accepted",
    "Endpoint",
    "Limits",
    "Outcome",
    "RequestError",
    "accept",
    "body_limit",
    "digest_key",
    "drop_marker",
    "is_drop",
    "key_from_basic_header",
    "messages_json",
    "parse_json_object",
    "parse_timestamp_ms",
    "read_body",
    "segment_message",
    "too_large",
]
