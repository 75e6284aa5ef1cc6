"""The one "busy" rule of the score refresh and the score history: a run holds its workspace's
state row for its whole transaction, and a second run that finds it held answers "busy" at once
instead of waiting to redo the same work."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from django.db import models, transaction

StateRow = TypeVar("StateRow", bound=models.Model)


@contextmanager
def workspace_state_held(model: type[StateRow], workspace_id: int) -> Iterator[StateRow | None]:
    """One transaction holding the workspace's `model` row (ScoringState, ScoreHistoryState),
    created first if missing; yields None, holding nothing, when another transaction holds it."""
    model._default_manager.get_or_create(workspace_id=workspace_id)
    with transaction.atomic():
        yield (
            model._default_manager.select_for_update(skip_locked=True)
            .filter(workspace_id=workspace_id)
            .first()
        )


def workspace_state_free(model: type[StateRow], workspace_id: int) -> bool:
    """Whether no transaction holds the workspace's `model` row now (no run is under way)."""
    with workspace_state_held(model, workspace_id) as state:
        return state is not None
