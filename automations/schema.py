"""The webhook events in the OpenAPI schema: `x-webhooks` (OpenAPI 3.0's extension, read by
Redoc), one entry per event type with its body's schema and an example, and the payload as
components. A postprocessing hook (SPECTACULAR_SETTINGS), as the ingestion door's paths are."""

from __future__ import annotations

from typing import Any

from automations.models import Automation
from automations.payloads import TEST_EVENT

_SUBJECT = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "tracking_id": {"type": "string"},
        "name": {"type": "string", "nullable": True},
        "engagement_score": {"type": "integer", "minimum": 0, "maximum": 100},
        "previous_score": {"type": "integer"},
        "score_change": {"type": "integer"},
        "last_seen": {"type": "string", "format": "date-time", "nullable": True},
        "segments": {"type": "array", "items": {"type": "string"}},
        "_links": {
            "type": "object",
            "properties": {"self": {"type": "string"}, "dashboard": {"type": "string"}},
        },
    },
}
_EVENT: dict[str, Any] = {
    "type": "object",
    "required": ["type", "timestamp", "data"],
    "properties": {
        "type": {"type": "string"},
        "timestamp": {"type": "string", "format": "date-time"},
        "data": {
            "type": "object",
            "properties": {
                "workspace": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                },
                "account": {"$ref": "#/components/schemas/WebhookSubject"},
                "user": {"$ref": "#/components/schemas/WebhookSubject"},
                "trigger": {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string", "enum": list(Automation.Trigger.values)},
                        "threshold": {"type": "integer"},
                        "days": {"type": "integer"},
                        "segment": {"type": "object"},
                    },
                },
                "automation": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                },
            },
        },
    },
}
# A digest: the subjects of one refresh past AUTOMATION_MAX_PER_REFRESH, counted, not shown.
_DIGEST = {
    "type": "object",
    "required": ["type", "timestamp", "data"],
    "properties": {
        "type": {"type": "string", "enum": ["account.digest", "user.digest"]},
        "timestamp": {"type": "string", "format": "date-time"},
        "data": {
            "type": "object",
            "required": ["automation", "trigger", "count", "subjects_url"],
            "properties": {
                "workspace": _EVENT["properties"]["data"]["properties"]["workspace"],
                "trigger": _EVENT["properties"]["data"]["properties"]["trigger"],
                "automation": _EVENT["properties"]["data"]["properties"]["automation"],
                "count": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "how many more subjects fired than had a message of their own",
                },
                "subjects_url": {
                    "type": "string",
                    "description": "the dashboard's list of them (filtered by the trigger's "
                    "segment or band when it has one), else the automation's page",
                },
            },
        },
    },
}
_HEADERS = (
    "Signed as Standard Webhooks: `webhook-id` (the delivery's id, the same on every attempt), "
    "`webhook-timestamp`, `webhook-signature` (`v1,<base64 HMAC-SHA256>`; two, space-separated, "
    "during a secret rotation). Answer 2xx within 15 s; 429 and 5xx are retried, until the "
    "automation is switched off: its pending retries are then cancelled, and nothing more is "
    "sent."
)
_EVENTS: dict[str, tuple[str, dict[str, Any]]] = {
    "score_changed": ("score changed by the threshold or more, up or down", {"threshold": 10}),
    "band_entered": ("entered a score band (75+, 50-74, 25-49, under 25)", {"threshold": 75}),
    "segment_entered": ("joined a segment", {"segment": {"id": 4, "name": "Enterprise"}}),
    "segment_left": ("left a segment", {"segment": {"id": 4, "name": "Enterprise"}}),
    "created": ("new since the automation was made (new_account, new_user)", {}),
    "inactive": ("no event for the automation's days", {"days": 30}),
}


def _example(kind: str, event: str, trigger: dict) -> dict:
    trigger_type = {"created": f"new_{kind}"}.get(event, event)
    subject = {
        "id": 17,
        "tracking_id": "acc_17" if kind == "account" else "usr_1042",
        "name": "Initech" if kind == "account" else "Ann Lee",
        "engagement_score": 82,
        "previous_score": 64,
        "score_change": 18,
        "last_seen": "2026-11-24T09:29:55+00:00",
        "segments": ["Enterprise"],
        "_links": {
            "self": f"https://eds.example.com/v2/{kind}s/17?workspace_id=1",
            "dashboard": f"https://eds.example.com/w/1/{kind}s/17/",
        },
    }
    return {
        "type": f"{kind}.{event}",
        "timestamp": "2026-11-24T09:30:12.402113+00:00",
        "data": {
            "workspace": {"id": 1, "name": "Default"},
            kind: subject,
            "trigger": {"type": trigger_type, **trigger},
            "automation": {"id": 3, "name": "Red hot accounts"},
        },
    }


def _digest_example(kind: str) -> dict:
    return {
        "type": f"{kind}.digest",
        "timestamp": "2026-11-24T09:30:12.402113+00:00",
        "data": {
            "workspace": {"id": 1, "name": "Default"},
            "trigger": {"type": f"new_{kind}"},
            "automation": {"id": 3, "name": f"New {kind}s"},
            "count": 280,
            "subjects_url": "https://eds.example.com/w/1/automations/3/",
        },
    }


def _webhook(summary: str, example: dict, schema: str = "WebhookEvent") -> dict:
    return {
        "post": {
            "summary": summary,
            "description": _HEADERS,
            "tags": ["automations"],
            "requestBody": {
                "content": {
                    "application/json": {
                        "schema": {"$ref": f"#/components/schemas/{schema}"},
                        "example": example,
                    }
                }
            },
            "responses": {"200": {"description": "Received (any 2xx)."}},
        }
    }


def automation_webhooks(result: dict, generator, request, public) -> dict:
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["WebhookSubject"] = _SUBJECT
    schemas["WebhookEvent"] = _EVENT
    schemas["WebhookDigest"] = _DIGEST
    hooks = {}
    for kind in ("account", "user"):
        for event, (what, trigger) in _EVENTS.items():
            hooks[f"{kind}.{event}"] = _webhook(
                f"An {kind} {what}" if kind == "account" else f"A {kind} {what}",
                _example(kind, event, trigger),
            )
        hooks[f"{kind}.digest"] = _webhook(
            f"More {kind}s in one refresh than AUTOMATION_MAX_PER_REFRESH (default 20) "
            "single messages: how many more, and where to see them",
            _digest_example(kind),
            "WebhookDigest",
        )
    test = _example("account", "score_changed", {"threshold": 10})
    test["type"] = TEST_EVENT
    test["data"].pop("account")
    hooks[TEST_EVENT] = _webhook("A test event sent from the dashboard or the admin", test)
    result["x-webhooks"] = hooks
    return result
