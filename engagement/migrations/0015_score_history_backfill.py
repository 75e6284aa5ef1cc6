"""ScoreHistoryBackfill: the past days from which a workspace's stored history is stale, noted by
the apply path; ScoreHistoryState.last_backfill_ms, how long the last recompute for them took. The days the hourly scan of changed rollups would still have found (rollups
changed since a workspace's last history run) are noted once here, since that scan is gone."""

from datetime import timedelta

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import Min
from django.utils import timezone


def note_unseen_changes(apps, schema_editor) -> None:
    ScoreHistoryState = apps.get_model("engagement", "ScoreHistoryState")
    ScoreHistoryBackfill = apps.get_model("engagement", "ScoreHistoryBackfill")
    EventRollup = apps.get_model("engagement", "EventRollup")
    overlap = timedelta(seconds=settings.SCORING_WATERMARK_OVERLAP_SECONDS)
    now = timezone.now()
    for state in ScoreHistoryState.objects.select_related("workspace").filter(
        checked_through__isnull=False, built_through__isnull=False
    ):
        first = EventRollup.objects.filter(
            product_id=state.workspace.product_id,
            updated_at__gt=state.checked_through - overlap,
            day__lte=state.built_through,
        ).aggregate(first=Min("day"))["first"]
        if first is not None:
            ScoreHistoryBackfill.objects.create(
                workspace_id=state.workspace_id, from_day=first, noted_at=now
            )


class Migration(migrations.Migration):
    dependencies = [
        ("engagement", "0014_workspace_figures"),
    ]

    operations = [
        migrations.CreateModel(
            name="ScoreHistoryBackfill",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("from_day", models.DateField()),
                ("noted_at", models.DateTimeField()),
                (
                    "workspace",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="engagement.workspace",
                    ),
                ),
            ],
        ),
        migrations.AddField(
            model_name="scorehistorystate",
            name="last_backfill_ms",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(note_unseen_changes, migrations.RunPython.noop),
    ]
