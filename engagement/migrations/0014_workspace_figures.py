"""Whole-workspace figures kept on ScoringState by each score refresh, counted once here for the
workspaces already scored (the next refresh keeps them from then on)."""

from django.db import migrations, models
from django.db.models import Count, Q
from django.utils import timezone


def count_figures(apps, schema_editor) -> None:
    ScoringState = apps.get_model("engagement", "ScoringState")
    User = apps.get_model("engagement", "User")
    Account = apps.get_model("engagement", "Account")
    UserScore = apps.get_model("engagement", "UserScore")
    AccountScore = apps.get_model("engagement", "AccountScore")
    through = timezone.now()
    for state in ScoringState.objects.select_related("workspace"):
        workspace = state.workspace
        users = UserScore.objects.filter(workspace_id=workspace.id).aggregate(
            rows=Count("id"), active=Count("id", filter=Q(events_in_window__gt=0))
        )
        scores = [0] * 101
        accounts = active_accounts = 0
        for row in (
            AccountScore.objects.filter(workspace_id=workspace.id)
            .values("engagement_score")
            .annotate(rows=Count("id"), active=Count("id", filter=Q(active_users__gt=0)))
        ):
            scores[min(row["engagement_score"], 100)] += row["rows"]
            accounts += row["rows"]
            active_accounts += row["active"]
        state.counted_through = through
        state.product_users = User.objects.filter(
            product_id=workspace.product_id, created_at__lte=through
        ).count()
        state.product_accounts = Account.objects.filter(
            product_id=workspace.product_id, created_at__lte=through
        ).count()
        state.scored_users = users["rows"]
        state.active_users = users["active"]
        state.scored_accounts = accounts
        state.active_accounts = active_accounts
        state.account_scores = scores
        state.save()


class Migration(migrations.Migration):
    dependencies = [
        ("engagement", "0013_segment_members_recent_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="scoringstate",
            name="account_scores",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="scoringstate",
            name="active_accounts",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="scoringstate",
            name="active_users",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="scoringstate",
            name="counted_through",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="scoringstate",
            name="product_accounts",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="scoringstate",
            name="product_users",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="scoringstate",
            name="scored_accounts",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="scoringstate",
            name="scored_users",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(count_figures, migrations.RunPython.noop),
    ]
