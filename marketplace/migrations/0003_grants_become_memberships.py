"""The per-product grant is replaced by engagement's product membership (manager role)."""

from django.db import migrations


def grants_to_memberships(apps, schema_editor):
    grant_model = apps.get_model("marketplace", "MarketplaceManager")
    membership_model = apps.get_model("engagement", "ProductMembership")
    for grant in grant_model.objects.all():
        membership_model.objects.update_or_create(
            user_id=grant.user_id, product_id=grant.product_id, defaults={"role": "manager"}
        )


class Migration(migrations.Migration):
    dependencies = [
        ("marketplace", "0002_sync_skips_and_heartbeat"),
        ("engagement", "0009_product_membership"),
    ]

    operations = [
        migrations.RunPython(grants_to_memberships, migrations.RunPython.noop),
        migrations.DeleteModel(name="MarketplaceManager"),
        migrations.AlterModelOptions(name="marketplaceconnection", options={}),
    ]
