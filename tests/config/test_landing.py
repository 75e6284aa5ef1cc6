"""The site's root is a page with the ways in, and the admin's "View site" leads there."""


def test_the_root_links_to_the_admin_and_the_api_docs(client, db, settings):
    settings.DEBUG = False
    response = client.get("/")

    assert response.status_code == 200
    page = response.content.decode()
    assert 'href="/admin/"' in page
    assert 'href="/api/docs/"' in page


def test_the_admins_view_site_link_opens_a_page(admin_client):
    page = admin_client.get("/admin/").content.decode()

    assert 'href="/"' in page
    assert admin_client.get("/").status_code == 200
