"""percentile_rank ranks a workspace's active rows only: NULL for a score of 0, and each other
score's rank among the rows scoring above 0 (issue 71 §2, docs/scoring.md).

DROP NOT NULL is a catalogue change on PostgreSQL: no rewrite or scan of the score tables. The
stored ranks are then recomputed once, per workspace, from its score histogram (the statement of
engagement/scoring/ranks.update_ranks, written out here as this migration's own copy of the
rule): an incremental refresh only rewrites the ranks that moved since the last one, so without
this the ranks stored under the old rule would stay until the next full rescore. Only the rows
whose rank changes are written, one workspace and table to a transaction.
"""

from django.db import migrations, models

_TABLES = ("engagement_userscore", "engagement_accountscore")


def _rank(float_type: str) -> str:
    """The rank over a histogram (s score, c rows): among the rows scoring above 0."""
    zeros = "SUM(CASE WHEN s = 0 THEN c ELSE 0 END) OVER ()"
    active = f"(SUM(c) OVER () - {zeros})"
    denominator = f"(CASE WHEN {active} > 1 THEN {active} - 1 ELSE 1 END)"
    ranked = f"100.0 * (SUM(c) OVER (ORDER BY s) - c - {zeros}) / {denominator}"
    return f"(CASE WHEN s > 0 THEN CAST(ROUND(CAST({ranked} AS NUMERIC), 1) AS {float_type}) END)"


def ranks_among_active(apps, schema_editor) -> None:
    connection = schema_editor.connection
    postgres = connection.vendor == "postgresql"
    rank = _rank("DOUBLE PRECISION" if postgres else "REAL")
    differs = "IS DISTINCT FROM" if postgres else "IS NOT"
    with connection.cursor() as cursor:
        for table in _TABLES:
            cursor.execute("SELECT id FROM engagement_workspace ORDER BY id")
            for (workspace_id,) in cursor.fetchall():
                cursor.execute(
                    f"""
                    UPDATE {table} SET percentile_rank = r.pr
                    FROM (
                        SELECT s, {rank} AS pr FROM (
                            SELECT engagement_score AS s, COUNT(*) AS c FROM {table}
                            WHERE workspace_id = %s GROUP BY engagement_score) h
                    ) r
                    WHERE {table}.workspace_id = %s AND {table}.engagement_score = r.s
                    AND {table}.percentile_rank {differs} r.pr
                    """,  # noqa: S608
                    [workspace_id, workspace_id],
                )


def ranks_of_zero_back(apps, schema_editor) -> None:
    """Backwards: the column is NOT NULL again, and the old rule gave a score of 0 the rank 0
    (the other ranks are the next full rescore's)."""
    with schema_editor.connection.cursor() as cursor:
        for table in _TABLES:
            cursor.execute(
                f"UPDATE {table} SET percentile_rank = 0 "  # noqa: S608
                "WHERE percentile_rank IS NULL"
            )


class Migration(migrations.Migration):
    # Not one transaction: the ALTERs commit (and release their ACCESS EXCLUSIVE locks) at once,
    # and each workspace's recompute commits on its own, so reads of the score tables go on
    # while a big table's ranks are rewritten.
    atomic = False

    dependencies = [
        ("engagement", "0027_segment_broken"),
    ]

    operations = [
        migrations.AlterField(
            model_name="userscore",
            name="percentile_rank",
            field=models.FloatField(blank=True, default=None, null=True),
        ),
        migrations.AlterField(
            model_name="accountscore",
            name="percentile_rank",
            field=models.FloatField(blank=True, default=None, null=True),
        ),
        migrations.RunPython(ranks_among_active, ranks_of_zero_back),
    ]
