"""PostgreSQL's pg_prewarm extension, where this database role may create it: a full rescore and a
history build ask it to read the rollups into the operating system's cache in large sequential
reads before reading them by user (engagement.backends.postgresql.rollups_prefetch).

It ships with PostgreSQL (contrib) but is not a trusted extension: creating it takes a
superuser (or a managed service's administrator role). Where this role may not, the migration
does nothing and scoring reads the rollups as before; an administrator can run
`CREATE EXTENSION pg_prewarm` in this database at any time. Never dropped on the way back: other
software may use it.
"""

from django.db import DatabaseError, migrations, transaction


def pg_prewarm_create(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm'")
        if cursor.fetchone() is None:
            return
        try:
            # A savepoint: a refusal leaves the migration's transaction usable.
            with transaction.atomic(using=schema_editor.connection.alias):
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        except DatabaseError:
            return


class Migration(migrations.Migration):
    dependencies = [("engagement", "0023_raw_events_without_key")]

    operations = [migrations.RunPython(pg_prewarm_create, migrations.RunPython.noop)]
