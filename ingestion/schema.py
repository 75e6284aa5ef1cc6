"""The OpenAPI description of the ingestion endpoints: each endpoint's body, its Basic key, every
status it can answer, and one path per endpoint (the door also accepts a trailing slash, which the
schema leaves out). The rules themselves live in `ingestion.acceptance`; this module only
describes them. The ingestion door (ingestion/asgi.py) is no Django view, so drf-spectacular
cannot find these paths: `ingestion_paths`, a postprocessing hook (SPECTACULAR_SETTINGS), adds
them to the schema, one per endpoint of `acceptance.ENDPOINTS`."""

from __future__ import annotations

from typing import Any

from config.openapi import NON_BLANK, SPACE, ErrorSerializer
from ingestion.acceptance import ENDPOINTS, Endpoint
from ingestion.acceptance.fields import MAX_ID_LENGTH, SECONDS_LIKE_BELOW_MS

# --- Security ----------------------------------------------------------------------------------


BASIC_SCHEME = {
    "type": "http",
    "scheme": "basic",
    "description": "The ingestion key as 'Basic <KEY>' or 'Basic base64(<KEY>:)' (the Segment "
    "SDKs' form: the key as user name, an empty password). The door checks the key's form; "
    "a key no product holds is accepted and dropped when applied.",
}

BASIC: list[dict[str, list[str]]] = [{"ingestionKey": []}]

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
    "description": "The write key, when not sent as Basic: a string (any other value is ignored)."
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

SEGMENT_MESSAGE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {
            "type": "string",
            "minLength": 1,
            "pattern": ANY_NON_BLANK,
            "description": "identify, group, track, page or screen (any case); a message of "
            "another type is accepted and dropped.",
        },
        "userId": identifier(
            "The user (required for every type but group, unless `anonymousId` is given)."
        ),
        "anonymousId": {
            "type": "string",
            "description": "Without a userId: accepted, not applied, counted per key and day.",
        },
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

# Segment's HTTP tracking API (/v1/track, /v1/t, ...): the path names the type, and with it the
# fields read (others, `type` included, are ignored whatever they hold) and those required;
# identify, track, page and screen take a userId or (counted, not applied) only an anonymousId.
_PATH_READS = {
    "identify": ("userId", "groupId", "traits", "anonymousId"),
    "track": ("userId", "event", "groupId", "context", "anonymousId"),
    "page": ("userId", "name", "groupId", "context", "anonymousId"),
    "screen": ("userId", "name", "groupId", "context", "anonymousId"),
    "group": ("groupId", "userId", "traits"),
    "alias": ("userId", "previousId"),
}
_PATH_REQUIRED = {"track": ["event"], "group": ["groupId"], "alias": ["userId", "previousId"]}
_NAMED_BY = [{"required": ["userId"]}, {"required": ["anonymousId"]}]


def segment_path_message(message_type: str) -> dict:
    """The body of Segment's /v1/<type>: a message of that type."""
    known = dict(SEGMENT_MESSAGE["properties"])
    known["userId"] = identifier(
        "The user (or only an anonymousId: counted, not applied).", nullable=False
    )
    # Read only when there is no userId: a non-blank string is then an anonymous call.
    known["anonymousId"] = {
        "description": "Without a userId, a non-blank string: accepted, not applied, counted "
        "per key and day."
    }
    known["previousId"] = identifier("The id merged into userId.", nullable=False)
    known["context"] = {
        "type": "object",
        "nullable": True,
        "description": "context.groupId names the account.",
    }
    known["name"] = {**known["name"], "nullable": True}
    if message_type == "group":
        known["userId"] = identifier("The user to link to the account.")
    read = (*_PATH_READS[message_type], "messageId", "timestamp", "sentAt", "writeKey")
    schema = {
        "type": "object",
        "properties": {name: known[name] for name in read},
        "additionalProperties": True,
        "description": f"One {message_type} message (the path names the type; other fields "
        "are ignored).",
    }
    if message_type in _PATH_REQUIRED:
        schema["required"] = _PATH_REQUIRED[message_type]
    if "anonymousId" in read:
        schema["anyOf"] = _NAMED_BY
    return schema


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

ERROR_COMPONENT = "Error"


def _error(description: str) -> dict:
    ref = {"$ref": f"#/components/schemas/{ERROR_COMPONENT}"}
    return {"content": {"application/json": {"schema": ref}}, "description": description}


def request_body(endpoint_name: str) -> dict:
    """The request body of an ingestion endpoint, JSON (optionally gzip, Content-Encoding):
    required (an empty one is a 400)."""
    if endpoint_name in ("v1/batch", "v1/import"):
        schema = SEGMENT_BATCH
    elif (message_type := ENDPOINTS[endpoint_name].message_type) is not None:
        schema = segment_path_message(message_type)
    elif endpoint_name == "segment":
        schema = {"oneOf": [SEGMENT_MESSAGE, TEST_CONNECTION]}
    else:
        # v1 paths name a collection (users), v2 paths the message type (identify).
        version, path = endpoint_name.split("/")
        v1_message_types = {"users": "identify", "groups": "group", "events": "track"}
        schema = V1_BODIES[v1_message_types[path]] if version == "v1" else V2_BODIES[path]
    content = {"application/json": {"schema": schema}}
    if ENDPOINTS[endpoint_name].message_type is not None:  # what sendBeacon sends
        content["text/plain"] = {"schema": schema}
    return {"content": content, "required": True}


def responses(endpoint_name: str) -> dict:
    """Every status an ingestion endpoint answers."""
    takes = ENDPOINTS[endpoint_name].takes
    if ENDPOINTS[endpoint_name].message_type is not None:
        success = {
            "200": {
                "content": {"application/json": {"schema": BATCH_ANSWER}},
                "description": 'Stored durably: {"success": true}.',
            }
        }
        large = "Body larger than 32 KiB (after gunzip)."
    elif takes == "batch":
        success = {
            "200": {
                "content": {"application/json": {"schema": BATCH_ANSWER}},
                "description": 'Stored durably: {"success": true}, with `rejected` for items '
                "left out.",
            }
        }
        large = "Above 512 KiB (after gunzip) or 2,500 items."
    else:
        success = {"202": {"description": "Accepted and stored durably; empty body."}}
        large = "Body larger than 32 KiB (after gunzip)."
    answers = {
        **success,
        "400": _error(
            "Not JSON, not an object, a field breaks a rule, a missing or malformed key, "
            "or a body that ended early."
        ),
    }
    if takes != "call":
        answers["401"] = _error("No write key (Basic or 'writeKey').")
    answers.update(
        {
            "413": _error(large),
            "414": _error("The request target is longer than 4094 bytes."),
            "415": _error("A Content-Encoding other than gzip."),
            "431": _error("More than 100 header fields, or one longer than 8190 bytes."),
            "503": _error("Cannot be stored now; retry after Retry-After seconds."),
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


_DESCRIPTIONS = {
    "call": "POST one call: 202 with an empty body once it is stored durably.",
    "segment": "POST one Segment-spec message (identify, group, track, page, screen): 202, "
    "empty body.",
    "batch": 'POST a Segment-SDK batch: 200 `{"success": true}`, with `rejected` items if any.',
}


def _description(endpoint: Endpoint) -> str:
    if endpoint.message_type is not None:
        return (
            f"Segment's HTTP tracking API: POST one {endpoint.message_type} message (JSON, as "
            'application/json or text/plain): 200 `{"success": true}` once it is stored durably.'
        )
    return _DESCRIPTIONS[endpoint.takes]


def operation(endpoint_name: str) -> dict:
    """The POST operation of one ingestion endpoint."""
    answer = {
        "operationId": f"{endpoint_name.replace('/', '_')}_create",
        "description": _description(ENDPOINTS[endpoint_name]),
        "tags": [endpoint_name.split("/")[0]],
        "requestBody": request_body(endpoint_name),
        "responses": responses(endpoint_name),
    }
    if required := security(endpoint_name):
        answer["security"] = required
    return answer


def ingestion_paths(result: dict, generator: Any, request: Any, public: bool) -> dict:
    """Postprocessing hook: every ingestion endpoint, its key's scheme and the error body."""
    paths = result.setdefault("paths", {})
    for endpoint_name in ENDPOINTS:
        paths[f"/{endpoint_name}"] = {"post": operation(endpoint_name)}
    result["paths"] = dict(sorted(paths.items()))
    components = result.setdefault("components", {})
    components.setdefault("securitySchemes", {})["ingestionKey"] = BASIC_SCHEME
    # The error body's component is config.openapi.ErrorSerializer, which the read API's views
    # name in their answers; drf-spectacular maps it only from a view.
    if ERROR_COMPONENT not in components.get("schemas", {}):
        raise LookupError(f"no {ERROR_COMPONENT} schema: a view must answer {ErrorSerializer}")
    return result
