"""The index of the accounts with an MRR (account_with_mrr_idx): the overview's money figures
read only those. Built CONCURRENTLY on PostgreSQL, so writes to the accounts go on meanwhile
(tests/config/test_migration_safety.py), plainly on SQLite."""

from django.db import migrations, models

INDEX = models.Index(
    fields=["product"],
    condition=models.Q(traits__has_key="am.mrr"),
    name="account_with_mrr_idx",
)


def create(apps, schema_editor) -> None:
    account = apps.get_model("engagement", "Account")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.add_index(account, INDEX, concurrently=True)
    else:
        schema_editor.add_index(account, INDEX)


def drop(apps, schema_editor) -> None:
    account = apps.get_model("engagement", "Account")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.remove_index(account, INDEX, concurrently=True)
    else:
        schema_editor.remove_index(account, INDEX)


class Migration(migrations.Migration):
    # CREATE INDEX CONCURRENTLY runs outside a transaction.
    atomic = False

    dependencies = [
        ("engagement", "0032_scoring_state_p90_at"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name="account", index=INDEX)],
            database_operations=[migrations.RunPython(create, drop)],
        ),
    ]
