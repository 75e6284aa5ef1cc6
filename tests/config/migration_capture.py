"""Run `manage.py migrate` on the database of DATABASE_URL and write, for each migration applied,
every SQL statement it sent (schema operations and RunPython alike, as executed, not as
`sqlmigrate` guesses them) and the catalogue as it stood before it: which tables existed and
which table each index belongs to. tests/config/test_migration_safety.py judges the result.

    python -m tests.config.migration_capture OUT.json [migrate arguments...]
"""

import json
import os
import sys


def main(out: str, migrate_args: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    runs: list[dict] = []
    capturing = [True]

    def catalogue() -> tuple[list[str], dict[str, str]]:
        capturing[0] = False
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace"
                    " AND relkind IN ('r', 'p')"
                )
                tables = sorted(row[0] for row in cursor.fetchall())
                cursor.execute(
                    "SELECT i.relname, t.relname FROM pg_index x"
                    " JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid"
                    " WHERE t.relnamespace = 'public'::regnamespace"
                )
                indexes = dict(cursor.fetchall())
        finally:
            capturing[0] = True
        return tables, indexes

    apply_migration = MigrationExecutor.apply_migration

    def apply_and_record(self, state, migration, fake=False, fake_initial=False):
        tables, indexes = catalogue()
        runs.append(
            {
                "app": migration.app_label,
                "name": migration.name,
                "atomic": migration.atomic,
                "tables_before": tables,
                "indexes_before": indexes,
                "statements": [],
            }
        )
        return apply_migration(self, state, migration, fake=fake, fake_initial=fake_initial)

    def record(execute, sql, params, many, context):
        if capturing[0] and runs:
            runs[-1]["statements"].append(str(sql))
        return execute(sql, params, many, context)

    MigrationExecutor.apply_migration = apply_and_record
    with connection.execute_wrapper(record):
        call_command("migrate", *migrate_args, verbosity=0, interactive=False)
    with open(out, "w") as file:
        json.dump(runs, file)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
