"""Segment.broken_reason and broken_at: why a segment's stored conditions could not be evaluated.

Both columns are added without rewriting the table or scanning it: on PostgreSQL 11+ a column
with a constant default ('' here) or none (NULL) is recorded in the catalogue only, so the
ACCESS EXCLUSIVE lock ADD COLUMN takes is held for an instant, however many segments there are.
The '' default stays in the database (db_default), so a process of the previous release, which
does not know the column, still creates segments during a deploy.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("engagement", "0026_score_composite_keys"),
    ]

    operations = [
        migrations.AddField(
            model_name="segment",
            name="broken_reason",
            field=models.TextField(blank=True, db_default="", default="", editable=False),
        ),
        migrations.AddField(
            model_name="segment",
            name="broken_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
    ]
