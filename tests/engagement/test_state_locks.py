"""One run at a time per workspace: a score refresh or history run that finds another holding the
workspace answers "busy" at once, and runs once that one has finished."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from engagement.history import score_history_update
from engagement.models import ScoreHistoryState, ScoringState
from engagement.scoring import workspace_refresh
from engagement.scoring.locks import workspace_state_held
from tests.conftest import make_tenant
from tests.engagement.helpers import held_in_another_session

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]


@contextmanager
def workspace_held(model, workspace_id: int) -> Iterator[None]:
    with workspace_state_held(model, workspace_id) as state:
        assert state is not None
        yield


@pytest.mark.parametrize(
    ("model", "run"),
    [
        (ScoringState, lambda workspace_id: workspace_refresh(workspace_id=workspace_id)),
        (ScoreHistoryState, lambda workspace_id: score_history_update(workspace_id=workspace_id)),
    ],
    ids=["score refresh", "score history"],
)
def test_a_second_run_answers_busy_while_the_first_holds_the_workspace(model, run):
    initech = make_tenant("Initech")
    done = threading.Event()
    thread = held_in_another_session(lambda: workspace_held(model, initech.workspace.id), done)
    try:
        assert run(initech.workspace.id).mode == "busy"
    finally:
        done.set()
        thread.join(10)

    assert run(initech.workspace.id).mode != "busy"
