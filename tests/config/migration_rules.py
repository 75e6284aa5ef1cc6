"""What a migration may send to PostgreSQL while the door accepts and the previous release's
processes still run (docs/deployment.md, "Upgrading in place"): the statements that rewrite or
scan a table under a lock that stops its writers, and the ones that break the previous
release's code, refused on every table that existed before the migration. A table the migration
creates itself is empty and unknown to the old code: anything goes there."""

import re
from dataclasses import dataclass, field

# Default expressions that are not volatile: PostgreSQL 11+ stores their value in the catalogue
# instead of rewriting the table.
_STABLE_DEFAULTS = {"now", "statement_timestamp", "transaction_timestamp", "current_timestamp"}
_NAME = r'(?:"[^"]+"|[\w.]+)'


def _bare(name: str) -> str:
    return name.split(".")[-1].strip('"')


@dataclass
class MigrationRun:
    """One migration as migration_capture.py saw it applied."""

    app: str
    name: str
    atomic: bool
    tables_before: list[str]
    indexes_before: dict[str, str]
    statements: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.app}.{self.name}"


def _normal(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip()


def _default_is_volatile(action: str) -> bool:
    ends = r"(?:\s+(?:NOT\s+NULL|NULL|CONSTRAINT|CHECK)\b|$)"
    match = re.search(r"\bDEFAULT\s+(.*?)" + ends, action, re.I)
    if not match:
        return False
    functions = re.findall(r"(\w+)\s*\(", match.group(1))
    return any(name.lower() not in _STABLE_DEFAULTS for name in functions)


def _added_not_null(table: str, column: str, run: MigrationRun) -> bool:
    """Whether `run` added `column` to `table` as NOT NULL."""
    pattern = (
        rf'^ALTER TABLE "?{re.escape(table)}"? ADD COLUMN "?{re.escape(column)}"? .*\bNOT NULL\b'
    )
    return any(re.search(pattern, _normal(sql), re.I) for sql in run.statements)


def _alter_table_faults(table: str, actions: str, run: MigrationRun) -> list[str]:
    faults = []
    if re.search(r"\bADD\s+COLUMN\b", actions, re.I):
        if _default_is_volatile(actions):
            faults.append("ADD COLUMN with a volatile default rewrites the table")
        if re.search(
            r"\b(?:SMALLSERIAL|BIGSERIAL|SERIAL)\b|\bGENERATED\b.*\b(?:STORED|IDENTITY)\b",
            actions,
            re.I,
        ):
            faults.append(
                "ADD COLUMN of an identity, serial or stored generated column rewrites the table"
            )
        if re.search(r"\b(?:UNIQUE|PRIMARY\s+KEY)\b", actions, re.I):
            faults.append(
                "ADD COLUMN ... UNIQUE/PRIMARY KEY builds an index under a lock that "
                "stops writes: add the column, CREATE UNIQUE INDEX CONCURRENTLY, then "
                "ADD CONSTRAINT ... USING INDEX"
            )
        if re.search(r"\bNOT\s+NULL\b", actions, re.I) and not re.search(
            r"\bDEFAULT\b", actions, re.I
        ):
            faults.append(
                "ADD COLUMN ... NOT NULL without a default: the previous release's "
                "inserts fail (use db_default)"
            )
    if re.search(r"\bSET\s+NOT\s+NULL\b", actions, re.I):
        faults.append(
            "SET NOT NULL scans the table under ACCESS EXCLUSIVE: add a CHECK (... IS "
            "NOT NULL) NOT VALID, VALIDATE it, then SET NOT NULL"
        )
    if re.search(
        r"\bALTER\s+(?:COLUMN\s+)?" + _NAME + r"\s+(?:SET\s+DATA\s+)?TYPE\b", actions, re.I
    ):
        faults.append(
            "ALTER COLUMN ... TYPE may rewrite the table under ACCESS EXCLUSIVE and "
            "changes what the previous release reads"
        )
    for dropped in re.finditer(
        r"\bALTER\s+(?:COLUMN\s+)?(" + _NAME + r")\s+DROP\s+DEFAULT\b", actions, re.I
    ):
        if _added_not_null(table, _bare(dropped.group(1)), run):
            faults.append(
                "a column added NOT NULL loses its default: the previous release's "
                "inserts, which do not name it, fail (use db_default)"
            )
    for constraint in re.finditer(r"\bADD\s+CONSTRAINT\s+" + _NAME + r"\s+(.*)", actions, re.I):
        body = constraint.group(1)
        if re.match(r"(?:CHECK|FOREIGN\s+KEY)\b", body, re.I) and not re.search(
            r"\bNOT\s+VALID\b", body, re.I
        ):
            faults.append(
                "ADD CONSTRAINT (CHECK or FOREIGN KEY) without NOT VALID scans the "
                "table under a lock that stops writes: add it NOT VALID, then VALIDATE "
                "CONSTRAINT in another statement"
            )
        if re.match(r"(?:UNIQUE|PRIMARY\s+KEY|EXCLUDE)\b", body, re.I) and not re.search(
            r"\bUSING\s+INDEX\b", body, re.I
        ):
            faults.append(
                "ADD CONSTRAINT UNIQUE/PRIMARY KEY/EXCLUDE builds its index under a lock "
                "that stops writes: CREATE UNIQUE INDEX CONCURRENTLY, then ADD "
                "CONSTRAINT ... USING INDEX"
            )
    if re.search(r"\bRENAME\s+(?!CONSTRAINT\b)", actions, re.I):
        faults.append(
            "RENAME of a table or column: the previous release's processes still use the old name"
        )
    if re.search(r"\bDROP\s+COLUMN\b", actions, re.I):
        faults.append(
            "DROP COLUMN: the previous release's processes still read and write it "
            "(drop it in the release after the one that stopped using it)"
        )
    if re.search(r"\bSET\s+(?:LOGGED|UNLOGGED|TABLESPACE|ACCESS\s+METHOD)\b", actions, re.I):
        faults.append("SET LOGGED/UNLOGGED/TABLESPACE/ACCESS METHOD rewrites the table")
    return faults


def statement_faults(sql: str, run: MigrationRun) -> list[str]:
    """What is wrong with one statement of `run` (an empty list: nothing)."""
    text = _normal(sql)
    existing = set(run.tables_before)
    if match := re.match(
        r"ALTER TABLE (?:ONLY )?(?:IF EXISTS )?(" + _NAME + r") (.*)$", text, re.I
    ):
        table = _bare(match.group(1))
        return _alter_table_faults(table, match.group(2), run) if table in existing else []
    if match := re.match(
        r"CREATE (?:UNIQUE )?INDEX (CONCURRENTLY )?(?:IF NOT EXISTS )?(?:" + _NAME + r" )?ON "
        r"(ONLY )?(" + _NAME + r")",
        text,
        re.I,
    ):
        concurrently, only, table = match.groups()
        if _bare(table) in existing and not concurrently and not only:
            return [
                "CREATE INDEX without CONCURRENTLY stops writes to the table while it builds "
                "(for the partitioned events table: ON ONLY the parent, CONCURRENTLY on each "
                "partition, then ATTACH)"
            ]
        return []
    if match := re.match(r"DROP INDEX (CONCURRENTLY )?(?:IF EXISTS )?(" + _NAME + r")", text, re.I):
        concurrently, index = match.groups()
        table = run.indexes_before.get(_bare(index))
        if table in existing and not concurrently:
            return [f"DROP INDEX without CONCURRENTLY takes ACCESS EXCLUSIVE on {table}"]
        return []
    if match := re.match(r"DROP TABLE (?:IF EXISTS )?(.*?)(?: CASCADE| RESTRICT)?$", text, re.I):
        dropped = [_bare(name.strip()) for name in match.group(1).split(",")]
        if any(name in existing for name in dropped):
            return [
                "DROP TABLE of a table the previous release's processes still use (drop it "
                "in the release after the one that stopped using it)"
            ]
        return []
    if match := re.match(r"(LOCK|TRUNCATE|CLUSTER|VACUUM FULL|REINDEX)\b(.*)$", text, re.I):
        verb, rest = match.groups()
        if verb.upper() == "REINDEX" and re.search(r"\bCONCURRENTLY\b", rest, re.I):
            return []
        names = {_bare(name) for name in re.findall(_NAME, rest)}
        if names & existing:
            return [f"{verb.upper()} of an existing table stops its readers or writers"]
    return []


def migration_faults(run: MigrationRun) -> list[str]:
    """Every fault of `run`, each with the statement that has it."""
    faults = []
    for sql in run.statements:
        for fault in statement_faults(sql, run):
            faults.append(f"{run.label}: {fault}\n    {_normal(sql)[:300]}")
    return faults
