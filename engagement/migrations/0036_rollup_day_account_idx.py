"""The index of a day's rollups by account, then user (rollup_day_account_idx): the hourly job
stores each ended day's rollups in that order and finds the rows of each chunk it moves by it.
Built CONCURRENTLY on PostgreSQL, so the drain's writes to the rollups go on meanwhile
(tests/config/test_migration_safety.py), plainly on SQLite."""

from django.db import migrations, models

INDEX = models.Index(
    fields=["product", "day", "account_key", "user"], name="rollup_day_account_idx"
)


def create(apps, schema_editor) -> None:
    rollup = apps.get_model("engagement", "EventRollup")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.add_index(rollup, INDEX, concurrently=True)
    else:
        schema_editor.add_index(rollup, INDEX)


def drop(apps, schema_editor) -> None:
    rollup = apps.get_model("engagement", "EventRollup")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.remove_index(rollup, INDEX, concurrently=True)
    else:
        schema_editor.remove_index(rollup, INDEX)


class Migration(migrations.Migration):
    # CREATE INDEX CONCURRENTLY runs outside a transaction.
    atomic = False

    dependencies = [
        ("engagement", "0035_refresh_demand_behind_running"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name="eventrollup", index=INDEX)],
            database_operations=[migrations.RunPython(create, drop)],
        ),
    ]
