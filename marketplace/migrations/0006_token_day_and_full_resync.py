"""Existing connections learn the day their token was set, and read every transaction once.

The day their details (and so the token) were last saved is the start of their latest
"Details saved" run; a connection without one takes the day it was created, the earliest the
token can have been set (so the expiry warning comes early rather than late). A connection
without a stored token (disconnected) keeps none.

Their next scheduled sync is a full one (as after saving details), so the transactions and
uninstalls of before the upgrade are read once; the six-hourly ones after it ask only for what
changed. A small table: one row per product.
"""

from django.db import migrations


def backfill(apps, schema_editor):
    Connection = apps.get_model("marketplace", "MarketplaceConnection")
    SyncRun = apps.get_model("marketplace", "SyncRun")
    for connection in Connection.objects.filter(token_set_on__isnull=True).exclude(
        api_token__isnull=True
    ):
        saved = (
            SyncRun.objects.filter(connection_id=connection.id, trigger="connected")
            .order_by("-started_at")
            .values_list("started_at", flat=True)
            .first()
        )
        when = saved or connection.created_at
        Connection.objects.filter(id=connection.id).update(token_set_on=when.date())


def full_resync(apps, schema_editor):
    Connection = apps.get_model("marketplace", "MarketplaceConnection")
    Connection.objects.update(full_sync_completed_at=None)


class Migration(migrations.Migration):
    dependencies = [("marketplace", "0005_revenue_sync_and_token_set_on")]

    operations = [
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
        migrations.RunPython(full_resync, migrations.RunPython.noop, elidable=True),
    ]
