"""One trait by name, in SQL on both databases: its JSON value, its text, and the accounts a
workspace's account filter (trait equals value) admits; segments, scoring and reads use them."""

from __future__ import annotations

from django.db.models import FloatField, Func, QuerySet, TextField
from django.db.models.fields.json import KeyTransform
from django.db.models.lookups import IsNull

# --- One trait by name -----------------------------------------------------------------------
#
# Django's `traits__<name>` lookups and KeyTransform read a name of digits as an array index
# (`"0"`, and `"2147483648"`, which PostgreSQL refuses as `jsonb -> bigint`) and `__` in a lookup
# string as a path. A trait name is one object key, whatever its characters: these two
# expressions take it as a text parameter, never as SQL or a path.

# SQLite: the value under one key, read with json_each (a JSON path cannot address every key:
# SQLite 3.40 compares quoted path labels with the stored text as it is, escapes included).
_SQLITE_KEY_ROW = "FROM json_each({json}) WHERE json_each.key = %s"


class TraitValue(KeyTransform):
    """The JSON value of the trait `name` in the JSON object column `source` (`traits -> name`).

    Compares as JSON with the usual key lookups (exact, gt, lt, isnull); for text comparisons use
    TraitText. On SQLite, like Django's KeyTransform, true, false and null read as those words.
    """

    def __init__(self, name: str, source: str) -> None:
        super().__init__(name, source)

    def as_postgresql(self, compiler, connection):
        lhs, params = compiler.compile(self.lhs)
        return f"({lhs} -> (%s)::text)", (*params, self.key_name)

    def as_sqlite(self, compiler, connection, **extra_context):
        lhs, params = compiler.compile(self.lhs)
        row = _SQLITE_KEY_ROW.format(json=lhs)
        sql = (
            "(SELECT CASE WHEN json_each.type IN ('true', 'false', 'null') THEN json_each.type "
            f"ELSE json_each.value END {row})"
        )
        return sql, (*params, self.key_name)


@TraitValue.register_lookup
class TraitValueIsNull(IsNull):
    """`isnull=True`: the trait is absent (a JSON null is present), on both databases."""


class TraitText(Func):
    """The trait `name` of the JSON object column `source` as text (`traits ->> name`).

    Strings without their quotes, numbers and booleans as their JSON text, objects and arrays as
    JSON text, null and an absent trait as NULL: a number or boolean matches its text on both
    databases.
    """

    output_field = TextField()

    def __init__(self, name: str, source: str) -> None:
        super().__init__(source)
        self.name = str(name)

    def as_sql(
        self, compiler, connection, function=None, template=None, arg_joiner=None, **extra_context
    ):
        raise NotImplementedError("TraitText supports PostgreSQL and SQLite.")

    def as_postgresql(self, compiler, connection, **extra_context):
        lhs, params = compiler.compile(self.source_expressions[0])
        return f"({lhs} ->> (%s)::text)", (*params, self.name)

    def as_sqlite(self, compiler, connection, **extra_context):
        lhs, params = compiler.compile(self.source_expressions[0])
        row = _SQLITE_KEY_ROW.format(json=lhs)
        sql = (
            "(SELECT CASE json_each.type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' "
            f"WHEN 'null' THEN NULL ELSE CAST(json_each.value AS TEXT) END {row})"
        )
        return sql, (*params, self.name)


class TraitNumber(Func):
    """The trait `name` of the JSON object column `source` as a number when it is a JSON number,
    else NULL (absent, null, a text such as "12.50", a boolean): sums and sorts of an amount such
    as `am.mrr` read only what was sent as a number."""

    output_field = FloatField()

    def __init__(self, name: str, source: str) -> None:
        super().__init__(source)
        self.name = str(name)

    def as_sql(
        self, compiler, connection, function=None, template=None, arg_joiner=None, **extra_context
    ):
        raise NotImplementedError("TraitNumber supports PostgreSQL and SQLite.")

    def as_postgresql(self, compiler, connection, **extra_context):
        lhs, params = compiler.compile(self.source_expressions[0])
        value = f"({lhs} -> (%s)::text)"
        sql = (
            f"(CASE WHEN jsonb_typeof({value}) = 'number' "
            f"THEN ({lhs} ->> (%s)::text)::double precision END)"
        )
        return sql, (*params, self.name, *params, self.name)

    def as_sqlite(self, compiler, connection, **extra_context):
        lhs, params = compiler.compile(self.source_expressions[0])
        row = _SQLITE_KEY_ROW.format(json=lhs)
        sql = (
            "(SELECT CASE WHEN json_each.type IN ('integer', 'real') "
            f"THEN CAST(json_each.value AS REAL) END {row})"
        )
        return sql, (*params, self.name)


def accounts_admitted(accounts: QuerySet, account_filter: dict) -> QuerySet:
    """The accounts a workspace's account filter admits: each named trait (its name taken
    literally, see TraitValue) equal to the filter's value. Scoring and reads both use this."""
    for index, (name, value) in enumerate(sorted(account_filter.items())):
        alias = f"_filter_{index}"
        accounts = accounts.alias(**{alias: TraitValue(name, "traits")}).filter(**{alias: value})
    return accounts
