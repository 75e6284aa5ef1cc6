"""Django's test clients, with every request to an ingestion path answered by the ingestion door
(ingestion/asgi.py) in this process, as uvicorn would hand it over.

The door runs with `InlineStore`: what it accepts is stored by the same `store_accepted_batch`
the group-commit writer calls, on the test's thread and connection, inside the test's
transaction. The door's coroutine is driven without an event loop: given a body that is already
here and an inline store, it never waits on anything, so it finishes on its first step (and
Django's database calls, made with no loop running, are allowed). Requests the door hands to
Django (other paths, a Host Django refuses) go through Django's test client as usual.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from django.http import HttpResponse
from django.test import Client
from rest_framework.test import APIClient

from ingestion.acceptance import http
from ingestion.asgi import IngestionFrontDoor, InlineStore
from ingestion.key_checks import KeyChecks, run_inline


class _ForDjango(Exception):
    """The door handed the request on: Django answers it."""


async def _to_django(scope, receive, send) -> None:
    raise _ForDjango


DOOR = IngestionFrontDoor(
    _to_django, writer=InlineStore(), key_checks=KeyChecks(run_sync=run_inline, ttl=0)
)


def asgi_scope(environ: dict[str, Any]) -> dict[str, Any]:
    """The ASGI scope uvicorn would give for the request a test client's `environ` describes."""
    path_bytes = environ["PATH_INFO"].encode("iso-8859-1")
    headers = []
    for name, value in environ.items():
        if name.startswith("HTTP_"):
            headers.append((name[5:].replace("_", "-").lower(), value))
        elif name in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            headers.append((name.replace("_", "-").lower(), value))
    if "HTTP_HOST" not in environ:
        headers.append(("host", environ.get("SERVER_NAME", "testserver")))
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": environ["REQUEST_METHOD"].upper(),
        "scheme": environ.get("wsgi.url_scheme", "http"),
        "path": path_bytes.decode("utf-8", "surrogateescape"),
        "raw_path": quote(path_bytes, safe="/:@!$&'()*+,;=-._~").encode("ascii"),
        "query_string": environ.get("QUERY_STRING", "").encode("iso-8859-1"),
        "root_path": "",
        "headers": [
            (name.encode("latin-1"), str(value).encode("latin-1")) for name, value in headers
        ],
        "client": ("127.0.0.1", 50000),
        "server": (environ.get("SERVER_NAME", "testserver"), int(environ.get("SERVER_PORT", 80))),
    }


def door_request(environ: dict[str, Any]) -> HttpResponse:
    """The door's answer to the request `environ` describes; `_ForDjango` if it hands it on."""
    stream = environ.get("wsgi.input")
    sent: list[dict] = []

    async def receive() -> dict:
        body = stream.read() if stream is not None else b""
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    step = DOOR(asgi_scope(environ), receive, send)
    try:
        step.send(None)
    except StopIteration:
        pass
    else:
        step.close()
        raise RuntimeError("the door waited for something an in-process request never sends")
    start, body = sent[0], b"".join(message.get("body", b"") for message in sent[1:])
    response = HttpResponse(body, status=start["status"])
    del response["Content-Type"]
    for name, value in start["headers"]:
        response[name.decode("latin-1")] = value.decode("latin-1")
    response.json = lambda: json.loads(response.content)
    return response


class _ThroughTheDoor:
    def request(self, **environ):
        if http.endpoint_for_path(environ.get("PATH_INFO", "")) is not None:
            # APIClient.credentials(), as APIClient.request adds them.
            sent = {**getattr(self, "_credentials", {}), **environ}
            try:
                return door_request(self._base_environ(**sent))
            except _ForDjango:
                pass
        return super().request(**environ)


class DoorClient(_ThroughTheDoor, Client):
    """Django's test `Client`, ingestion paths answered by the door."""


class DoorAPIClient(_ThroughTheDoor, APIClient):
    """DRF's test `APIClient`, ingestion paths answered by the door."""
