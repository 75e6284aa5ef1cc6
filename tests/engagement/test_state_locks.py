"""One run at a time per workspace: a score refresh or history run that finds another holding the
workspace answers "busy" at once, and runs once that one has finished."""

import threading

import pytest
from django.db import connection

from engagement.history import score_history_update
from engagement.models import ScoreHistoryState, ScoringState
from engagement.scoring import workspace_refresh
from engagement.scoring.locks import workspace_state_held
from tests.conftest import make_tenant

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]


def hold_in_another_session(model, workspace_id: int, held: threading.Event, done: threading.Event):
    def run() -> None:
        try:
            with workspace_state_held(model, workspace_id) as state:
                assert state is not None
                held.set()
                done.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    assert held.wait(10)
    return thread


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
    held, done = threading.Event(), threading.Event()
    thread = hold_in_another_session(model, initech.workspace.id, held, done)
    try:
        assert run(initech.workspace.id).mode == "busy"
    finally:
        done.set()
        thread.join(10)

    assert run(initech.workspace.id).mode != "busy"
