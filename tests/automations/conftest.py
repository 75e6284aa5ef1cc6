"""Automations' actors: Acme's workspace with scores, and a real local receiver."""

import pytest

from tests.automations.receiver import Receiver


@pytest.fixture
def receiver(settings):
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = True
    started = Receiver().start()
    yield started
    started.stop()
