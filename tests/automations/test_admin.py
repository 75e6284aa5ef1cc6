"""The admin never shows an automation's URL or signing secret back."""

from automations.services import automation_create


def test_the_change_page_never_renders_the_url_or_the_secret(acme, receiver, admin_client):
    automation = automation_create(
        workspace=acme.workspace, trigger="new_account", url=receiver.url
    )
    page = admin_client.get(f"/admin/automations/automation/{automation.id}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert automation.secret not in html and receiver.url not in html
    listing = admin_client.get("/admin/automations/automation/").content.decode()
    assert automation.secret not in listing and receiver.url not in listing
