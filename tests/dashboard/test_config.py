"""The workspace's configuration page: read and download for viewers, edit for managers."""

import json

from engagement.models import ProductMembership, Segment
from engagement.workspace_config import workspace_config_get
from tests.dashboard.conftest import signed_in


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
    assert json.loads(download.content) == workspace_config_get(workspace=acme.workspace)
    assert client.post(page(acme), {"document": download.content.decode()}).status_code == 403
    assert client.get(page(globex)).status_code == 404  # another product's workspace


def test_a_manager_applies_a_document_or_sees_every_fault(acme, vera):
    ProductMembership.objects.filter(user=vera).update(role=ProductMembership.Role.MANAGER)
    client = signed_in(vera)
    assert b"<textarea" in client.get(page(acme)).content
    document = workspace_config_get(workspace=acme.workspace)
    document["weights"] = {"Login": 11, "Export": -1}
    refused = client.post(page(acme), {"document": json.dumps(document)})
    assert refused.status_code == 200
    assert b"Nothing was changed" in refused.content
    assert b"&#x27;Login&#x27; must weigh" in refused.content
    assert b"&#x27;Export&#x27; must weigh" in refused.content
    assert client.post(page(acme), {"document": "{"}).content.count(b"Not JSON") == 1
    document["weights"] = {"Login": 4}
    document["segments"] = document["segments"][:2]
    applied = client.post(page(acme), {"document": json.dumps(document)})
    assert applied.status_code == 302 and applied["Location"].endswith("config/?saved=1")
    assert workspace_config_get(workspace=acme.workspace) == document
    assert Segment.objects.filter(workspace=acme.workspace).count() == 2
