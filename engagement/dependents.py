"""Every row that refers to a user or an account, deleted model by model: what an erasure and an
identity merge remove before the row itself (each moves or deletes the raw events itself first,
by day, so the ORM never scans them)."""

from __future__ import annotations

from django.db.models import ForeignObjectRel

from engagement.models import Account, User

# What the receipt calls the rows of each model that refers to a user or an account; any other
# such model (added later) is counted under its own name.
_COUNT_NAMES = {
    "membership": "memberships",
    "userscore": "scores",
    "accountscore": "scores",
    "userscoreday": "score_days",
    "accountscoreday": "score_days",
    "segmentmember": "segment_memberships",
    "segmentmembershipchange": "segment_changes",
    "useralias": "aliases",
}


def dependents_delete(target: User | Account, handled: tuple[type, ...]) -> dict[str, int]:
    """Delete every row of every other model that refers to the target, model by model."""
    counts: dict[str, int] = {}
    # Hidden relations too (related_name="+"): score history and segment changes are such.
    for relation in type(target)._meta.get_fields(include_hidden=True):
        # The relations other models hold to the target (auto-created, not concrete).
        if not isinstance(relation, ForeignObjectRel):
            continue
        model = relation.related_model
        if model in handled:
            continue
        if model is type(target):  # an erased account's children stay, with no parent
            model._base_manager.filter(**{relation.field.attname: target.id}).update(
                **{relation.field.attname: None}
            )
            continue
        deleted = model._base_manager.filter(**{relation.field.attname: target.id}).delete()[0]
        model_name = str(model._meta.model_name)  # None only for an abstract model
        name = _COUNT_NAMES.get(model_name, model_name)
        counts[name] = counts.get(name, 0) + deleted
    return counts
