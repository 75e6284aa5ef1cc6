"""The OpenAPI description of the ingestion endpoints: each endpoint's body, its Basic key, every
status it can answer, and one path per endpoint (ingestion/urls.py also accepts a trailing slash,
which the schema leaves out). The rules themselves live in `ingestion.acceptance`; this module
only describes them. Used by the views' `extend_schema` and by SPECTACULAR_SETTINGS."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiResponse

from ingestion.acceptance import ENDPOINTS
from ingestion.acceptance.fields import MAX_ID_LENGTH, SECONDS_LIKE_BELOW_MS
from readapi.schema import NON_BLANK, SPACE
from readapi.serializers import ErrorSerializer  # the one error body of every API

# --- Trailing slashes --------------------------------------------------------------------------


def without_optional_slash(endpoints):
    """Preprocessing hook: an ingestion endpoint routed as `^name/?$` appears once, as `/name`."""
    kept = []
    for path, path_regex, method, callback in endpoints:
        name = path.strip("/")
        if name in ENDPOINTS and path.endswith("/"):
            path = path.rstrip("/")
        kept.append((path, path_regex, method, callback))
    return kept


# --- Security ----------------------------------------------------------------------------------


BASIC_SCHEME = {
    "type": "http",
    "scheme": "basic",
    "description": "The ingestion key as 'Basic <KEY>' or 'Basic base64(<KEY>:)' (the Segment "
    "SDKs' form: the key as user name, an empty password). The door checks the key's form; "
    "a key no product holds is accepted and dropped when applied.",
}


class IngestionAutoSchema(AutoSchema):
    """The ingestion views' schema: the key is read by the acceptance rules, not by DRF, so the
    security requirement comes from the endpoint rather than from authentication classes."""

    def get_auth(self):
        self.registry.register_on_missing(
            ResolvedComponent(
                name="ingestionKey",
                type=ResolvedComponent.SECURITY_SCHEMA,
                object="ingestionKey",
                schema=BASIC_SCHEME,
            )
        )
        return security(self.view.endpoint_name)


BASIC = [{"ingestionKey": []}]

# --- Field schemas -----------------------------------------------------------------------------

# An id holds a character other than whitespace (Python's), and no NUL; a key or a type too.
ID_PATTERN = NON_BLANK
ANY_NON_BLANK = f"[^{SPACE}]"


def identifier(description: str, *, nullable: bool = True) -> dict:
    """An id field; an optional one may be null, which counts as absent."""
    return {
        "type": "string",
        "nullable": nullable,
        "minLength": 1,
        "maxLength": MAX_ID_LENGTH,
        "pattern": ID_PATTERN,
        "description": description,
    }


_ISO = {"type": "string", "format": "date-time", "nullable": True}
_MS = {
    "type": "number",
    "minimum": SECONDS_LIKE_BELOW_MS,
    "description": "Unix milliseconds (a number below 1e11 looks like seconds: a 400).",
}
TIME = {
    "oneOf": [_ISO, _MS],
    "description": "ISO 8601 (no offset means UTC) or Unix milliseconds; not before 1970 and "
    "at most 24 hours ahead (default: when received).",
}
# A client's send time only corrects the message times for its clock's skew.
SENT_AT = {
    "oneOf": [_ISO, _MS, {"type": "number", "maximum": -1}],
    "description": "When the client sent it (ISO 8601 or Unix milliseconds): times are "
    "corrected for the client clock's skew.",
}
WRITE_KEY = {
    "description": "The write key, when not sent as Basic: a string (any other value is "
    "ignored)."
}
TRAITS = {
    "type": "object",
    "nullable": True,
    "additionalProperties": True,
    "description": "Any JSON object: at most 32 KiB (UTF-8 bytes) as JSON, 32 levels deep, "
    "trait names of at most 255 characters; no NUL characters.",
}


def _body(properties: dict, required: list[str], description: str) -> dict:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": True,
        "description": description + " Other fields are ignored.",
    }


def _call_bodies(user: str, group: str, *, key_in_body: bool) -> dict[str, dict]:
    key = {}
    if key_in_body:
        key = {
            "api_key": {
                "type": "string",
                "minLength": 1,
                "pattern": ANY_NON_BLANK,
                "description": "The ingestion key.",
            }
        }
    required_key = ["api_key"] if key_in_body else []
    user_id = identifier("The user's id in your product.")
    group_id = identifier("The account's id in your product.")
    required_user = identifier("The user's id in your product.", nullable=False)
    required_group = identifier("The account's id in your product.", nullable=False)
    return {
        "identify": _body(
            {**key, user: required_user, group: group_id, "traits": TRAITS, "timestamp": TIME},
            [*required_key, user],
            "Creates or updates a user (traits are merged), and may link it to an account.",
        ),
        "group": _body(
            {**key, group: required_group, user: user_id, "traits": TRAITS, "timestamp": TIME},
            [*required_key, group],
            "Creates or updates an account (traits are merged), and may link a user to it.",
        ),
        "track": _body(
            {
                **key,
                user: required_user,
                "event": identifier("The event's name.", nullable=False),
                group: group_id,
                "context": {
                    "type": "object",
                    "nullable": True,
                    "properties": {"groupId": group_id},
                    "description": "context.groupId, when set, names the account instead.",
                },
                "timestamp": TIME,
            },
            [*required_key, user, "event"],
            "Records one event of a user (and of an account).",
        ),
    }


V2_BODIES = _call_bodies("userId", "groupId", key_in_body=False)
V1_BODIES = _call_bodies("user_id", "group_id", key_in_body=True)

SEGMENT_MESSAGE = {
    "type": "object",
    "properties": {
        "type": {
            "type": "string",
            "minLength": 1,
            "pattern": ANY_NON_BLANK,
            "description": "identify, group, track, page or screen (any case); a message of "
            "another type is accepted and dropped.",
        },
        "userId": identifier("The user (required for every type but group)."),
        "groupId": identifier("The account (required for group)."),
        "event": identifier("The event's name (track)."),
        "name": {"type": "string", "description": "page/screen: the event 'Viewed <name> Page'."},
        "traits": TRAITS,
        "context": {"type": "object", "description": "context.groupId names the account."},
        "messageId": identifier("Deduplicates retries."),
        "timestamp": TIME,
        "sentAt": SENT_AT,
        "writeKey": WRITE_KEY,
    },
    "required": ["type"],
    "additionalProperties": True,
    "description": "One Segment-spec message. Other fields are ignored.",
}

TEST_CONNECTION = {
    "type": "object",
    "maxProperties": 0,
    "description": "{}: what Segment's 'test connection' posts; a 202 that stores nothing.",
}

SEGMENT_BATCH = {
    "type": "object",
    "properties": {
        "batch": {
            "type": "array",
            "maxItems": 2500,
            "items": {
                "description": "A Segment message, as POST /segment takes. Any item is taken: "
                "one that breaks the rules is left out and listed in `rejected`."
            },
        },
        "sentAt": SENT_AT,
        "writeKey": WRITE_KEY,
    },
    "required": ["batch"],
    "additionalProperties": True,
    "description": "A Segment-SDK batch. Other fields are ignored.",
}

BATCH_ANSWER = {
    "type": "object",
    "properties": {
        "success": {"type": "boolean", "enum": [True]},
        "rejected": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "index": {"type": "integer"},
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "fields": {
                        "type": "object",
                        "additionalProperties": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "required": ["index", "code", "message"],
            },
        },
    },
    "required": ["success"],
}

def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


def request_body(endpoint_name: str) -> dict:
    """The request body of an ingestion endpoint, JSON (optionally gzip, Content-Encoding)."""
    if endpoint_name in ("v1/batch", "v1/import"):
        schema = SEGMENT_BATCH
    elif endpoint_name == "segment":
        schema = {"oneOf": [SEGMENT_MESSAGE, TEST_CONNECTION]}
    else:
        # v1 paths name a collection (users), v2 paths the message type (identify).
        version, path = endpoint_name.split("/")
        v1_message_types = {"users": "identify", "groups": "group", "events": "track"}
        schema = V1_BODIES[v1_message_types[path]] if version == "v1" else V2_BODIES[path]
    return {"application/json": schema}


def responses(endpoint_name: str) -> dict:
    """Every status an ingestion endpoint answers."""
    takes = ENDPOINTS[endpoint_name].takes
    if takes == "batch":
        success = {
            200: OpenApiResponse(
                BATCH_ANSWER,
                description='Stored durably: {"success": true}, with `rejected` for items left '
                "out.",
            )
        }
        large = "Above 512 KiB (after gunzip) or 2,500 items."
    else:
        success = {202: OpenApiResponse(description="Accepted and stored durably; empty body.")}
        large = "Body larger than 32 KiB (after gunzip)."
    answers = {
        **success,
        400: _error(
            "Not JSON, not an object, a field breaks a rule, a missing or malformed key, "
            "or a body that ended early."
        ),
    }
    if takes != "call":
        answers[401] = _error("No write key (Basic or 'writeKey').")
    answers.update(
        {
            413: _error(large),
            414: _error("The request target is longer than 4094 bytes."),
            415: _error("A Content-Encoding other than gzip."),
            431: _error("More than 100 header fields, or one longer than 8190 bytes."),
            503: _error("Cannot be stored now; retry after Retry-After seconds."),
        }
    )
    return answers


def security(endpoint_name: str) -> list:
    """Basic for v2; Basic or `writeKey` in the body for the Segment endpoints (so Basic is one
    of two ways there); v1 carries its key in the body."""
    endpoint = ENDPOINTS[endpoint_name]
    if endpoint.key_in_body:
        return []
    return BASIC if endpoint.takes == "call" else [*BASIC, {}]


def body_required(result, generator, request, public):
    """Postprocessing hook: every ingestion request needs its body (an empty one is a 400)."""
    for path, operations in result.get("paths", {}).items():
        if path.strip("/") in ENDPOINTS:
            for operation in operations.values():
                if "requestBody" in operation:
                    operation["requestBody"]["required"] = True
    return result
