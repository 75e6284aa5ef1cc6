"""API tokens in the admin: named "API tokens", their scopes as words, not JSON."""

from django.urls import reverse

from readapi.models import ApiToken
from readapi.services import api_token_create


def test_the_menu_reads_api_tokens(admin_client, acme):
    html = admin_client.get(reverse("admin:index")).content.decode()

    assert ">API tokens</a>" in html
    assert "Api tokens" not in html


def test_scopes_read_as_words_in_the_list_and_on_a_token_page(admin_client, acme):
    eraser, _ = api_token_create(product_id=acme.product.id, name="Eraser", scopes=["delete"])
    old = ApiToken.objects.exclude(id=eraser.id).get(product=acme.product)
    ApiToken.objects.filter(id=old.id).update(scopes=[])  # issued before scopes existed

    listing = admin_client.get(reverse("admin:readapi_apitoken_changelist")).content.decode()
    assert '<td class="field-scope_list">read, delete</td>' in listing
    assert '<td class="field-scope_list">read</td>' in listing
    assert "[&quot;" not in listing and '["' not in listing

    page = admin_client.get(reverse("admin:readapi_apitoken_change", args=[eraser.id]))
    assert '<div class="readonly">read, delete</div>' in page.content.decode()
