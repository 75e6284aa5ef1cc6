from django.db import migrations

# PostgreSQL only: the raw events keep no primary key (nor any index; 0008 dropped the last
# other one). They are appended, never updated and never read by id: retention drops whole
# partitions, and erasure and aliases find a user's rows by product and user. Django still sees
# `id` as the model's primary key; the column keeps its default, so every event still gets an id
# of its own. Each drained event wrote an entry in the (id, timestamp) index no query read:
# storing 300,000 events took 0.48-0.57 s with it and 0.29-0.34 s without (docs/benchmarks.md).


def drop_key(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "ALTER TABLE engagement_event DROP CONSTRAINT engagement_event_part_pkey"
        )


def add_key(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "ALTER TABLE engagement_event "
            'ADD CONSTRAINT engagement_event_part_pkey PRIMARY KEY (id, "timestamp")'
        )


class Migration(migrations.Migration):
    dependencies = [
        ("engagement", "0022_lean_segment_rows"),
    ]

    operations = [migrations.RunPython(drop_key, add_key)]
