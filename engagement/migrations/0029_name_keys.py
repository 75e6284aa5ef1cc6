"""User.name_key and Account.name_key: the natural sort key of the name a page shows
(engagement.presentation.natural_sort_key), so that the users and accounts lists sort by name
("Company 2" before "Company 10") through an index rather than a sort of every row.

Built for a table of 1M users and 100k accounts without holding it:
- the columns come with a constant default ('', kept in the database as db_default so that a
  process of the previous release still inserts rows): on PostgreSQL 11+ ADD COLUMN records it in
  the catalogue without rewriting the table;
- the keys are filled in batches over id ranges, each batch its own transaction (the migration is
  not atomic), so no lock is held longer than one batch's update;
- the (product, name_key, id) indexes are built CONCURRENTLY on PostgreSQL (writes go on), plainly
  on SQLite. Only a change of name_key itself then costs a user row its HOT update
  (0006_fewer_user_writes): the last-seen writes of every batch of events still update in place.
"""

import json

from django.db import migrations, models, transaction

from engagement import bulk
from engagement.presentation import account_name_key, user_name_key

BATCH = 10_000
INDEXES = {
    "user": models.Index(fields=["product", "name_key", "id"], name="user_name_key_idx"),
    "account": models.Index(fields=["product", "name_key", "id"], name="account_name_key_idx"),
}


def _traits(value: object) -> dict:
    if isinstance(value, str):  # a backend that hands JSON back as text
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _fill(model, columns: tuple[str, ...], key) -> None:
    last = model.objects.order_by("-id").values_list("id", flat=True).first()
    if last is None:
        return
    for start in range(0, last + 1, BATCH):
        with transaction.atomic():
            rows = model.objects.filter(id__gte=start, id__lt=start + BATCH).values_list(
                "id", "name_key", *columns
            )
            changed = []
            for row_id, current, *values in rows:
                wanted = key(*values)
                if wanted != current:
                    changed.append((row_id, wanted))
            bulk.update_by_id(model, ("name_key",), changed)


def fill_name_keys(apps, schema_editor) -> None:
    _fill(
        apps.get_model("engagement", "User"),
        ("traits", "email", "tracking_id"),
        lambda traits, email, tracking_id: user_name_key(_traits(traits), email, tracking_id),
    )
    _fill(
        apps.get_model("engagement", "Account"),
        ("traits", "tracking_id"),
        lambda traits, tracking_id: account_name_key(_traits(traits), tracking_id),
    )


def _index_operation(model_name: str) -> migrations.SeparateDatabaseAndState:
    index = INDEXES[model_name]

    def create(apps, schema_editor) -> None:
        model = apps.get_model("engagement", model_name)
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.add_index(model, index, concurrently=True)
        else:
            schema_editor.add_index(model, index)

    def drop(apps, schema_editor) -> None:
        model = apps.get_model("engagement", model_name)
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.remove_index(model, index, concurrently=True)
        else:
            schema_editor.remove_index(model, index)

    return migrations.SeparateDatabaseAndState(
        state_operations=[migrations.AddIndex(model_name=model_name, index=index)],
        database_operations=[migrations.RunPython(create, drop)],
    )


class Migration(migrations.Migration):
    # Each batch of the fill commits on its own, and CREATE INDEX CONCURRENTLY runs outside a
    # transaction.
    atomic = False

    dependencies = [
        ("engagement", "0028_percentile_rank_among_active"),
    ]

    operations = [
        migrations.AddField(
            model_name="user",
            name="name_key",
            field=models.CharField(
                blank=True, db_default="", default="", editable=False, max_length=255
            ),
        ),
        migrations.AddField(
            model_name="account",
            name="name_key",
            field=models.CharField(
                blank=True, db_default="", default="", editable=False, max_length=255
            ),
        ),
        migrations.RunPython(fill_name_keys, migrations.RunPython.noop),
        _index_operation("user"),
        _index_operation("account"),
    ]
