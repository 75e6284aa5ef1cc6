"""The Slack incoming-webhook message of a delivery: text for notifications, blocks for the
channel."""

from __future__ import annotations

from engagement.bands import is_cold, is_hot

FLAME = ":fire:"
SNOWFLAKE = ":snowflake:"


def _change_text(change: int | None) -> str:
    """The change as the dashboard marks it: a flame from +10, a snowflake from -10
    (engagement/bands.py), the bare number otherwise."""
    if not change:
        return "no change"
    if is_hot(change):
        return f"{FLAME} +{change}"
    if is_cold(change):
        return f"{SNOWFLAKE} {change}"
    return f"{change:+d}"


def slack_message(*, event_type: str, subject: dict, what: str, dashboard_url: str) -> dict:
    """`subject` as the webhook body's account or user; `what` says what happened."""
    name = subject.get("name") or subject.get("tracking_id") or "?"
    score = subject.get("engagement_score")
    change = _change_text(subject.get("score_change"))
    text = f"{name}: {what} (score {score}, {change})"
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{name}*: {what}"}},
            {
                "type": "section",
                "fields": [
                    {"type": "mrkdwn", "text": f"*Score*\n{score}"},
                    {"type": "mrkdwn", "text": f"*Change*\n{change}"},
                ],
            },
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Open in the dashboard"},
                        "url": dashboard_url,
                    }
                ],
            },
            {"type": "context", "elements": [{"type": "mrkdwn", "text": event_type}]},
        ],
    }


def slack_digest_message(
    *, event_type: str, kind: str, count: int, automation_name: str, subjects_url: str
) -> dict:
    """The digest of `count` more accounts or users than the refresh's single messages:
    "and 280 more accounts (New accounts): <link>"."""
    more = f"{count} more {kind}" if count == 1 else f"{count} more {kind}s"
    text = f"and {more} ({automation_name}): {subjects_url}"
    return {
        "text": text,
        "blocks": [
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"and *{more}* ({automation_name})"},
            },
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": f"Open the {kind}s"},
                        "url": subjects_url,
                    }
                ],
            },
            {"type": "context", "elements": [{"type": "mrkdwn", "text": event_type}]},
        ],
    }
