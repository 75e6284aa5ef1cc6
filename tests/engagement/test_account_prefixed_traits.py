"""account_prefixed_traits_replace: the bulk write behind marketplace license traits."""

import pytest

from engagement.models import Account
from engagement.services import Message, account_prefixed_traits_replace, messages_apply
from tests.factories import AccountFactory

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def test_replaces_prefixed_traits_and_leaves_the_others(acme):
    AccountFactory(
        product=acme.product,
        tracking_id="cloud-1",
        traits={"plan": "pro", "am.status": "active", "am.tier": "50 Users"},
        trait_times={"plan": 1, "am.status": 1, "am.tier": 1},
    )
    result = account_prefixed_traits_replace(
        product_id=acme.product.id,
        traits_by_tracking_id={"cloud-1": {"am.status": "cancelled", "am.hosting": "Cloud"}},
    )
    account = Account.objects.get(product=acme.product, tracking_id="cloud-1")
    assert account.traits == {"plan": "pro", "am.status": "cancelled", "am.hosting": "Cloud"}
    assert set(account.trait_times) == {"plan", "am.status", "am.hosting"}
    assert account.trait_times["plan"] == 1
    assert account.identified is True
    assert (result.matched, result.created) == (1, 0)


def test_creates_missing_accounts_not_yet_identified(acme, globex):
    AccountFactory(product=globex.product, tracking_id="cloud-2")
    result = account_prefixed_traits_replace(
        product_id=acme.product.id,
        traits_by_tracking_id={"cloud-2": {"am.status": "active"}, "cloud-3": {}},
    )
    assert (result.matched, result.created) == (0, 2)
    created = Account.objects.get(product=acme.product, tracking_id="cloud-2")
    assert created.identified is False
    assert created.traits == {"am.status": "active"}
    # the same tracking id in another product is another account, untouched
    assert Account.objects.get(product=globex.product, tracking_id="cloud-2").traits == {}


def test_a_later_group_call_identifies_the_account_and_keeps_the_license_traits(acme):
    account_prefixed_traits_replace(
        product_id=acme.product.id, traits_by_tracking_id={"cloud-4": {"am.status": "active"}}
    )
    messages_apply(
        product_id=acme.product.id,
        messages=[
            Message(
                message_type="group",
                timestamp_ms=1_700_000_000_000,
                group_id="cloud-4",
                traits={"name": "Acme Site"},
            )
        ],
    )
    account = Account.objects.get(product=acme.product, tracking_id="cloud-4")
    assert account.identified is True
    assert account.traits == {"am.status": "active", "name": "Acme Site"}


def test_refuses_keys_outside_the_prefix_and_writes_nothing(acme):
    with pytest.raises(ValueError, match="outside"):
        account_prefixed_traits_replace(
            product_id=acme.product.id,
            traits_by_tracking_id={"cloud-5": {"am.status": "active", "plan": "free"}},
        )
    assert not Account.objects.filter(product=acme.product, tracking_id="cloud-5").exists()


def test_bulk_queries_only(acme, django_assert_max_num_queries):
    traits = {f"cloud-{n}": {"am.status": "active", "am.tier.number": n} for n in range(200)}
    with django_assert_max_num_queries(10):
        result = account_prefixed_traits_replace(
            product_id=acme.product.id, traits_by_tracking_id=traits
        )
    assert result.created == 200
    assert (
        Account.objects.filter(product=acme.product, traits__has_key="am.tier.number").count()
        == 200
    )


def test_an_account_whose_prefixed_traits_are_already_these_is_not_written(acme):
    traits = {"cloud-6": {"am.status": "active", "am.mrr": 20.0, "am.tier.number": 50}}
    product_id = acme.product.id
    first = account_prefixed_traits_replace(product_id=product_id, traits_by_tracking_id=traits)
    before = Account.objects.get(product=acme.product, tracking_id="cloud-6")

    # the same values (20 and 20.0 are one JSON number) in another order: nothing to write
    same = {"cloud-6": {"am.tier.number": 50.0, "am.mrr": 20, "am.status": "active"}}
    again = account_prefixed_traits_replace(product_id=product_id, traits_by_tracking_id=same)
    kept = Account.objects.get(product=acme.product, tracking_id="cloud-6")
    changed = account_prefixed_traits_replace(
        product_id=acme.product.id,
        traits_by_tracking_id={"cloud-6": {"am.status": "active", "am.mrr": 0.0}},
    )
    after = Account.objects.get(product=acme.product, tracking_id="cloud-6")

    assert (first.changed, again.changed, changed.changed) == (1, 0, 1)
    assert (kept.updated_at, kept.trait_times) == (before.updated_at, before.trait_times)
    assert after.traits == {"am.status": "active", "am.mrr": 0.0}
    assert after.updated_at > before.updated_at


def test_without_create_missing_only_existing_accounts_are_written(acme):
    AccountFactory(product=acme.product, tracking_id="cloud-7")
    result = account_prefixed_traits_replace(
        product_id=acme.product.id,
        traits_by_tracking_id={"cloud-7": {"am.mrr": 5.0}, "erased": {"am.mrr": 9.0}},
        create_missing=False,
    )
    assert (result.matched, result.created, result.changed) == (1, 0, 1)
    assert Account.objects.get(product=acme.product, tracking_id="cloud-7").traits["am.mrr"] == 5
    assert not Account.objects.filter(product=acme.product, tracking_id="erased").exists()
