"""The embedded broker (config/broker.py): a worker never takes a message before it is whole."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kombu import Connection
from kombu.transport import filesystem
from kombu.utils import json as kombu_json

import config.broker

TRANSPORT = "config.broker:Transport"
ROOT = Path(__file__).resolve().parents[2]


def channel(folder):
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder)}
    return Connection(
        "filesystem://localhost/", transport=TRANSPORT, transport_options=options
    ).default_channel


def test_a_worker_polling_while_a_message_is_written_takes_it_only_once_whole(
    tmp_path, monkeypatch
):
    """The worker polls in the one moment that matters: after the publisher has created the
    message's file, before its content is written (kombu's own transport hands it the empty file
    then, and the worker stops on a JSONDecodeError)."""
    publisher, worker = channel(tmp_path), channel(tmp_path)
    seen_while_writing = []

    def dumps_with_a_poll(payload):
        try:
            seen_while_writing.append(worker._get("celery"))
        except filesystem.Empty:
            seen_while_writing.append("nothing")
        return kombu_json.dumps(payload)

    # The payload is encoded after the file is opened, in kombu's `_put` and in ours.
    monkeypatch.setattr(config.broker, "dumps", dumps_with_a_poll)
    monkeypatch.setattr(filesystem, "dumps", dumps_with_a_poll)

    publisher._put("celery", {"task": "scores_refresh_due", "n": 1})

    assert seen_while_writing == ["nothing"]
    assert worker._get("celery") == {"task": "scores_refresh_due", "n": 1}
    with pytest.raises(filesystem.Empty):
        worker._get("celery")


def test_the_embedded_mode_sends_through_it(tmp_path):
    """Without CELERY_BROKER_URL, every process (web, workers, beat, commands) connects with it."""
    code = (
        "import django; django.setup()\n"
        "from config.celery import app\n"
        "with app.connection_for_write() as c: print(type(c.transport).__module__)"
    )
    env = {**os.environ, "CELERY_BROKER_URL": "", "DATA_DIR": str(tmp_path), "ENV_FILE": os.devnull}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )

    assert result.stdout.strip() == "config.broker"
