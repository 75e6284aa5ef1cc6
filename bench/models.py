"""The table bench_ingest's Django yardstick stores each request in (bench/bare_urls.py).

The columns of the lean door's table (bench/lean_door.py): when, a digest of the key, the body.
Unmanaged: bench_ingest creates the table (BARE_TABLE_SQL there) in its own database; the service
never installs this app.
"""

from django.db import models


class BareAccepted(models.Model):
    received_at = models.DateTimeField()
    key_digest = models.TextField()
    body = models.JSONField()

    class Meta:
        app_label = "bench"
        db_table = "bench_bare_accepted"
        managed = False
