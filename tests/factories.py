"""Factories for the named actors tests use."""

import factory

from engagement.models import Account, Product, User, Workspace
from ingestion.models import IngestionKey


class ProductFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Product

    name = factory.Sequence(lambda n: f"Product {n}")


class WorkspaceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Workspace

    product = factory.SubFactory(ProductFactory)
    name = "Default"


class IngestionKeyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = IngestionKey

    product = factory.SubFactory(ProductFactory)
    label = "test key"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User

    product = factory.SubFactory(ProductFactory)
    tracking_id = factory.Sequence(lambda n: f"usr_{n}")
    identified = True


class AccountFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Account

    product = factory.SubFactory(ProductFactory)
    tracking_id = factory.Sequence(lambda n: f"acct_{n}")
    identified = True
