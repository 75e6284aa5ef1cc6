"""The workspace's configuration page: read and download for viewers, edit for managers."""

import html
import json
import re

import pytest
from django.test import Client

from engagement.models import ProductMembership, Segment
from tests.dashboard.conftest import signed_in
from tests.engagement.config_probes import probe_cases, stored_config

# Applies configuration documents: runs on PostgreSQL and again on SQLite.
pytestmark = pytest.mark.both_databases


def page(tenant, suffix="config/"):
    return f"/w/{tenant.workspace.id}/{suffix}"


def test_a_viewer_reads_and_downloads_the_document_but_cannot_apply_one(acme, vera, globex):
    client = signed_in(vera)
    response = client.get(page(acme))
    assert response.status_code == 200
    assert b'<pre id="config-document"' in response.content
    assert b"<textarea" not in response.content
    download = client.get(page(acme, "config.json"))
    assert download["Content-Disposition"] == (
        f'attachment; filename="workspace-{acme.workspace.id}.json"'
    )
    assert json.loads(download.content) == stored_config(acme.workspace)
    assert client.post(page(acme), {"document": download.content.decode()}).status_code == 403
    assert client.get(page(globex)).status_code == 404  # another product's workspace


@pytest.fixture
def manager(acme, vera) -> Client:
    ProductMembership.objects.filter(user=vera).update(role=ProductMembership.Role.MANAGER)
    return signed_in(vera)


def faults_shown(response) -> list[str]:
    """The faults listed on the page, as a person reads them."""
    listed = re.search(r'<ul id="config-faults">(.*?)</ul>', response.content.decode(), re.S)
    return [html.unescape(item) for item in re.findall(r"<li>(.*?)</li>", listed.group(1), re.S)]


def test_a_manager_applies_a_document_or_sees_every_fault(acme, manager):
    assert b"<textarea" in manager.get(page(acme)).content
    before = stored_config(acme.workspace)
    document = json.loads(json.dumps(before))
    document["weights"] = {"Login": 11, "Export": -1}
    refused = manager.post(page(acme), {"document": json.dumps(document)})
    assert refused.status_code == 400
    assert b"Nothing was changed" in refused.content
    assert faults_shown(refused) == [
        "weights.Login: a whole number from 0 to 10",
        "weights.Export: a whole number from 0 to 10",
    ]
    assert b"<textarea" in refused.content and b"&quot;Login&quot;: 11" in refused.content
    assert stored_config(acme.workspace) == before
    not_json = manager.post(page(acme), {"document": "{"})
    assert not_json.status_code == 400
    assert faults_shown(not_json) == [
        "The document is refused: not JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)"
    ]
    document["weights"] = {"Login": 4}
    document["segments"] = document["segments"][:2]
    applied = manager.post(page(acme), {"document": json.dumps(document)})
    assert applied.status_code == 302 and applied["Location"].endswith("config/?saved=1")
    assert stored_config(acme.workspace) == document
    assert Segment.objects.filter(workspace=acme.workspace).count() == 2


@pytest.mark.parametrize("probe", probe_cases())
def test_a_hostile_document_is_refused_with_the_form_and_its_fault(acme, manager, probe):
    before = stored_config(acme.workspace)
    refused = manager.post(page(acme), {"document": probe.text(before)})
    assert refused.status_code == 400
    assert b"<textarea" in refused.content
    assert any(probe.expected(before) in fault for fault in faults_shown(refused))
    assert stored_config(acme.workspace) == before


def test_a_document_over_a_million_characters_is_refused(acme, manager):
    before = stored_config(acme.workspace)
    text = json.dumps({**before, "name": "x" * 1_000_000})
    refused = manager.post(page(acme), {"document": text})
    assert refused.status_code == 400
    assert faults_shown(refused) == [
        "The document is too large: at most 1,000,000 characters",
    ]
    assert stored_config(acme.workspace) == before
