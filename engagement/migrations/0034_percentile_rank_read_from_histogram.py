"""Percentile ranks are no longer stored: every reader looks a row's rank up in the histogram the
last refresh kept on the workspace's ScoringState (engagement/scoring/ranks.py), so a refresh
rewrites only the rows it recomputed (docs/scoring.md).

The models lose the field; the nullable columns stay in the database for this release, since the
previous release's processes still write them while an upgrade replaces them one by one, and go
in the next release (docs/deployment.md, "What a migration may do"). Rows this release writes
leave them NULL; nothing reads them.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("engagement", "0033_account_with_mrr_idx"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="accountscore", name="percentile_rank"),
                migrations.RemoveField(model_name="userscore", name="percentile_rank"),
            ],
            database_operations=[],
        ),
    ]
