"""Every test module that applies or scores data runs on both databases, or says why not.

`make test` runs the modules marked `both_databases` a second time on SQLite (the embedded mode).
A module that calls the drain, the apply service, a score refresh or the history is held to that
here, so a new module cannot quietly run on PostgreSQL alone: it is marked `both_databases`, or
`postgresql` (it needs the server itself) or `e2e` (it starts real processes)."""

import re
from pathlib import Path

TESTS = Path(__file__).parent
APPLIES_OR_SCORES = re.compile(
    r"accepted_requests_drain|messages_apply|workspace_refresh|workspace_rescore"
    r"|score_history_update|account_prefixed_traits_replace|\bdrain\("
)
MARKED = re.compile(r"pytest\.mark\.(both_databases|postgresql|e2e)")
# Pages and admin screens read data a fixture applied; their subject is the page, not the data.
READERS = {"config", "dashboard"}


def test_every_module_that_applies_or_scores_data_is_marked_for_both_databases():
    unmarked = [
        str(path.relative_to(TESTS))
        for path in sorted(TESTS.glob("*/test_*.py"))
        if path.parent.name not in READERS
        and APPLIES_OR_SCORES.search(path.read_text())
        and not MARKED.search(path.read_text())
    ]
    assert unmarked == []
