from django.db import migrations

# PostgreSQL only: the score tables' database key becomes their unique (subject, workspace) key,
# and `id` a plain column with no index. Django still sees `id` as the primary key (nothing
# reads a score row by id; every read and write names the workspace and the subject), while the
# database keeps one index fewer per row: a full rescore that moves every score writes a new
# version of a million rows, and each version paid for an entry in the `id` index too (docs/
# scoring.md). The key keeps its constraint's name, so the ORM's constraint and every
# ON CONFLICT (workspace_id, subject) stand as they are. SQLite's rows are keyed by their rowid,
# which costs no index, so nothing changes there.
_TABLES = (
    ("engagement_userscore", "user_score_unique", "user_id"),
    ("engagement_accountscore", "account_score_unique", "account_id"),
)


def key_by_subject(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, key, subject in _TABLES:
        schema_editor.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, DROP CONSTRAINT {key}, "
            f"ADD CONSTRAINT {key} PRIMARY KEY ({subject}, workspace_id)"
        )


def key_by_id(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, key, subject in _TABLES:
        schema_editor.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT {key}, "
            f"ADD CONSTRAINT {table}_pkey PRIMARY KEY (id), "
            f"ADD CONSTRAINT {key} UNIQUE ({subject}, workspace_id)"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("engagement", "0022_lean_segment_rows"),
    ]

    operations = [migrations.RunPython(key_by_subject, key_by_id)]
