"""The ingestion health page: what was applied per minute, what waits, what was dropped and
why, each key's last request, and the product's connections (through engagement.health)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from engagement import health
from ingestion.models import AcceptedMinute
from ingestion.services.keys import ingestion_key_create, ingestion_key_revoke
from ingestion.tasks import purge_old_drops
from tests.dashboard.conftest import signed_in


def health_page(person, tenant):
    response = signed_in(person).get(f"/w/{tenant.workspace.id}/health/")
    assert response.status_code == 200
    return response


def test_applied_requests_are_counted_per_minute_and_key(acme, vera, post_json, drain):
    for user in ("u1", "u2", "u3"):
        assert post_json("/v2/identify", {"userId": user}, auth=acme.basic).status_code == 202
    drain()

    response = health_page(vera, acme)
    report = response.context["ingestion"]
    assert sum(m.requests for m in report.accepted_per_minute) == 3
    assert response.context["accepted_total"] == 3
    (key,) = report.keys
    assert key.fingerprint == acme.key.fingerprint and key.active
    assert key.last_request_at is not None
    assert report.backlog.requests == 0 and report.backlog.oldest_received_at is None
    assert b"accepted-chart-data" in response.content


def test_the_backlog_and_its_oldest_age(acme, vera, post_json):
    post_json("/v2/identify", {"userId": "u1"}, auth=acme.basic)
    post_json("/v2/identify", {"userId": "u2"}, auth=acme.basic)

    report = health_page(vera, acme).context["ingestion"]
    assert report.backlog.requests == 2
    assert report.backlog.oldest_received_at <= timezone.now()
    # Not applied yet, but the key's last request is known from the backlog.
    assert report.keys[0].last_request_at is not None


def test_drops_by_reason_key_and_endpoint(acme, globex, vera, post_json, drain):
    old = ingestion_key_create(product_id=acme.product.id, label="old app")
    ingestion_key_revoke(key_id=old.id)
    for _ in range(2):
        post_json("/v2/track", {"userId": "u", "event": "A"}, auth=f"Basic {old.key}")
    post_json("/v2/identify", {"userId": "u"}, auth="Basic a-typo-nobody-has")
    post_json("/v2/identify", {"userId": "u"}, auth=f"Basic {globex.key.key}")
    drain()

    response = health_page(vera, acme)
    drops = response.context["ingestion"].drops
    # Only Acme's drops: not Globex's traffic, not a key no product has.
    assert [(d.reason, d.key_fingerprint, d.endpoint, d.drops) for d in drops] == [
        ("revoked_key", old.fingerprint, "v2/track", 2)
    ]
    assert drops[0].last_detail.startswith("Key ")
    keys = {k.label: k for k in response.context["ingestion"].keys}
    assert not keys["old app"].active


def test_a_superuser_also_sees_drops_of_keys_no_product_has(acme, admin_user, post_json, drain):
    post_json("/v2/identify", {"userId": "u"}, auth="Basic a-typo-nobody-has")
    drain()

    drops = health_page(admin_user, acme).context["ingestion"].drops
    assert [d.reason for d in drops] == ["unknown_key"]


def test_a_quiet_product_says_so(acme, vera):
    response = health_page(vera, acme)
    assert b"No request under this product" in response.content
    assert b"Nothing dropped." in response.content
    assert b"No connection configured" in response.content


def test_registered_connections_are_shown(acme, vera, monkeypatch):
    when = timezone.now() - timedelta(hours=1)
    report = health.ConnectionHealth(
        name="Marketplace",
        state="requires_authentication",
        state_label="Requires authentication",
        healthy=False,
        last_run_at=when,
        last_run_outcome="failed",
        last_success_at=None,
        last_error="The API token was refused (401).",
        last_error_at=when,
    )
    monkeypatch.setattr(health, "_connection_providers", [lambda product_id: [report]])

    response = health_page(vera, acme)
    assert response.context["connections"] == [report]
    assert b"The API token was refused (401)." in response.content


@pytest.mark.django_db
def test_the_tally_is_purged_with_the_drop_log(settings):
    settings.INGESTION_DROP_RETENTION_DAYS = 7
    now = timezone.now()
    for age in (1, 8):
        AcceptedMinute.objects.create(
            key_digest="d" * 64,
            minute=now - timedelta(days=age),
            requests=1,
            last_received_at=now - timedelta(days=age),
        )
    purge_old_drops()
    assert AcceptedMinute.objects.count() == 1


# --- A key's allowed origins, set by a manager on this page (docs/browser.md) ----------------


def make_manager(person, tenant) -> None:
    from engagement.models import ProductMembership

    ProductMembership.objects.filter(user=person, product=tenant.product).update(
        role=ProductMembership.Role.MANAGER
    )


def save_origins(person, tenant, key_id, text):
    return signed_in(person).post(
        f"/w/{tenant.workspace.id}/health/", {"key_id": key_id, "allowed_origins": text}
    )


def test_a_manager_sets_a_keys_allowed_origins(acme, vera):
    make_manager(vera, acme)

    response = save_origins(vera, acme, acme.key.id, "https://app.acme.test\nhttps://b.test/")

    assert response.status_code == 302
    acme.key.refresh_from_db()
    assert acme.key.allowed_origins == "https://app.acme.test\nhttps://b.test/"
    page = signed_in(vera).get(response["Location"]).content.decode()
    assert "Allowed origins saved" in page
    assert "https://app.acme.test" in page


def test_a_line_that_is_no_origin_is_shown_and_nothing_saved(acme, vera):
    make_manager(vera, acme)

    response = save_origins(vera, acme, acme.key.id, "app.acme.test")

    assert response.status_code == 200
    assert "is not an origin" in response.content.decode()
    acme.key.refresh_from_db()
    assert acme.key.allowed_origins == ""


def test_a_viewer_cannot_change_origins_and_sees_no_form(acme, vera):
    assert save_origins(vera, acme, acme.key.id, "https://x.test").status_code == 403
    assert 'name="allowed_origins"' not in health_page(vera, acme).content.decode()
    acme.key.refresh_from_db()
    assert acme.key.allowed_origins == ""


def test_another_products_key_is_a_404(acme, globex, vera):
    make_manager(vera, acme)

    assert save_origins(vera, acme, globex.key.id, "https://x.test").status_code == 404
    globex.key.refresh_from_db()
    assert globex.key.allowed_origins == ""


def _long_allowlist() -> str:
    """Over 10,000 characters, the last origin whole: cutting it would allow app.example.co."""
    filler = "\n".join(f"https://app{n:04}.example.com" for n in range(400))
    return f"{filler}\nhttps://app.example.com"


def test_an_allowlist_over_ten_thousand_characters_is_refused_whole_not_cut(acme, vera):
    make_manager(vera, acme)
    text = _long_allowlist()
    assert len(text) > 10_000

    response = save_origins(vera, acme, acme.key.id, text)

    assert response.status_code == 200
    assert "at most 10,000 characters" in response.content.decode()
    acme.key.refresh_from_db()
    assert acme.key.allowed_origins == ""


def test_an_allowlist_with_a_nul_is_refused(acme, vera):
    make_manager(vera, acme)

    response = save_origins(vera, acme, acme.key.id, "https://a.test\x00")

    assert response.status_code == 200 and "is not an origin" in response.content.decode()
    acme.key.refresh_from_db()
    assert acme.key.allowed_origins == ""


@pytest.mark.parametrize("key_id", ["²", "-1", "1e3", "9" * 30, "\x00"])
def test_a_key_id_that_is_not_an_id_is_a_404(acme, vera, key_id):
    make_manager(vera, acme)

    assert save_origins(vera, acme, key_id, "https://x.test").status_code == 404
