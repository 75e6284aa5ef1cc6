from django.db import migrations

# PostgreSQL only, as 0023 for the score rows: each drained event wrote an entry in an index no
# query reads. The rollups' database key becomes their unique daily key (same name, so every
# ON CONFLICT and the ORM's constraint stand), and the raw events, appended, never updated and
# never read by id (retention drops whole partitions; erasure and aliases find a user's rows by
# product and user), keep no key at all. Django still sees `id` as the primary key of both; the
# column keeps its default. Storing 300,000 events: 0.48-0.57 s against 0.32-0.33 s without the
# events' key (docs/benchmarks.md). A large installation rebuilds the rollups' key once here.


def key_by_day(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        "ALTER TABLE engagement_eventrollup DROP CONSTRAINT engagement_eventrollup_pkey, "
        "DROP CONSTRAINT rollup_unique_day, ADD CONSTRAINT rollup_unique_day "
        "PRIMARY KEY (product_id, user_id, event_name, day, account_key)"
    )
    schema_editor.execute("ALTER TABLE engagement_event DROP CONSTRAINT engagement_event_part_pkey")


def key_by_id(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        "ALTER TABLE engagement_eventrollup DROP CONSTRAINT rollup_unique_day, "
        "ADD CONSTRAINT engagement_eventrollup_pkey PRIMARY KEY (id), "
        "ADD CONSTRAINT rollup_unique_day "
        "UNIQUE (product_id, user_id, event_name, day, account_key)"
    )
    schema_editor.execute(
        "ALTER TABLE engagement_event "
        'ADD CONSTRAINT engagement_event_part_pkey PRIMARY KEY (id, "timestamp")'
    )


class Migration(migrations.Migration):
    dependencies = [
        ("engagement", "0023_score_rows_keyed_by_subject"),
    ]

    operations = [migrations.RunPython(key_by_day, key_by_id)]
