"""Activation: the share of a workspace's activation steps a user or an account has done.

A step is `event:<name>` (done once the subject has ever sent that event) or `trait:<name>`
(done once the trait is set to anything but null); order does not matter. An account's step is
done when any of its users did it, or, for a trait, when the account itself has it; in a
hierarchy an account's users are its own and its descendants' (engagement/hierarchy).

Read a page at a time, when a record is read: one grouped query over the daily rollups for the
event steps (through the rollups' (product, user, event, ...) index) and one per trait step,
so scoring pays nothing for it. `done_at` is the UTC day an event was first sent (rollups
keep days, and raw events are not read), or the time of the message that set the trait.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time

from django.db.models import BigIntegerField, Min
from django.db.models.functions import Cast

from engagement.hierarchy import account_subtrees
from engagement.input_rules import at, key_path, text_fault
from engagement.models import Account, ActivationStep, EventRollup, User, Workspace
from engagement.traits import TraitText

KINDS = ("event", "trait")
NAME_MAX = 255


@dataclass(frozen=True, slots=True)
class StepDone:
    step: str
    done: bool
    done_at: datetime | None


@dataclass(frozen=True, slots=True)
class Activation:
    share: float | None  # exact; None when the workspace has no steps for this target
    steps: list[StepDone]


def step_parts(step: str) -> tuple[str, str]:
    """("event" | "trait", name) of a valid step."""
    kind, _, name = step.partition(":")
    return kind, name


def _step_faults(steps: object, where: str) -> list[str]:
    if not isinstance(steps, list):
        return [at(where, "a list of steps, each 'event:<name>' or 'trait:<name>'")]
    faults, seen = [], set()
    for position, step in enumerate(steps):
        here = f"{where}[{position}]"
        kind, name = step_parts(step) if isinstance(step, str) else ("", "")
        if kind not in KINDS:
            faults.append(at(here, "a step, 'event:<name>' or 'trait:<name>'"))
        elif fault := text_fault(name, max_length=NAME_MAX, what=f"'{kind}:' and a name"):
            faults.append(at(here, fault))
        elif step in seen:
            faults.append(at(here, f"{step!r} is listed twice"))
        else:
            seen.add(step)
    return faults


def activation_faults(activation: object, *, path: str = "activation") -> list[str]:
    """Every fault of an {"users": [steps], "accounts": [steps]} document, each after its path
    (`activation.users[0]: ...`), or []."""
    targets = ActivationStep.Target.values
    if not isinstance(activation, dict):
        return [at(path, 'an object {"users": [steps], "accounts": [steps]}')]
    faults = [
        at(key_path(path, key), f"not a target; one of {', '.join(targets)}")
        for key in activation
        if key not in targets
    ]
    for target in targets:
        faults += _step_faults(activation.get(target, []), key_path(path, target))
    return faults


def workspace_activation(*, workspace_id: int) -> dict[str, list[str]]:
    """{"users": [steps], "accounts": [steps]}, each in its configured order."""
    found: dict[str, list[str]] = {target: [] for target in ActivationStep.Target.values}
    steps = ActivationStep.objects.filter(workspace_id=workspace_id).order_by("position", "id")
    for target, step in steps.values_list("target", "step"):
        found[target].append(step)
    return found


def activation_replace(*, workspace: Workspace, activation: dict[str, list[str]]) -> None:
    """Store exactly these steps (the caller checked activation_faults), in the order given."""
    ActivationStep.objects.filter(workspace=workspace).delete()
    ActivationStep.objects.bulk_create(
        [
            ActivationStep(workspace=workspace, target=target, step=step, position=position)
            for target in ActivationStep.Target.values
            for position, step in enumerate(activation.get(target, []))
        ]
    )


def _first_sent(product_id: int, names: list[str], owner: str, ids: Iterable[int]) -> dict:
    """{(subject id, event): first UTC day} through the rollups; `owner` is the path from a
    rollup to the subject id ("user_id", or "user__memberships__account_id")."""
    rows = (
        EventRollup.objects.filter(
            product_id=product_id, event_name__in=names, **{f"{owner}__in": list(ids)}
        )
        .values(owner, "event_name")
        .annotate(first=Min("day"))
        .values_list(owner, "event_name", "first")
    )
    return {(subject_id, event): first for subject_id, event, first in rows}


def _trait_set(model, owner: str, name: str, ids: Iterable[int]) -> dict[int, int | None]:
    """{subject id: earliest time (ms) the trait got its value} among rows whose trait is set
    (TraitText takes the name literally, and reads a null as NULL on both databases)."""
    rows = (
        model.objects.filter(**{f"{owner}__in": list(ids)})
        .annotate(value=TraitText(name, "traits"))
        .filter(value__isnull=False)
        .values(owner)
        .annotate(at=Min(Cast(TraitText(name, "trait_times"), output_field=BigIntegerField())))
        .values_list(owner, "at")
    )
    return dict(rows)


def _account_trait_set(name: str, covered: dict[int, set[int]]) -> dict[int, int | None]:
    """_trait_set for accounts: the account's own trait, or that of any user of the account or
    of its descendants (`covered`: each account with its descendants), the earliest time."""
    own = _trait_set(Account, "id", name, covered)
    users = _trait_set(User, "memberships__account_id", name, set().union(*covered.values()))
    trait_times: dict[int, int | None] = {}
    for account_id, subtree in covered.items():
        times = [own[account_id]] if account_id in own else []
        times += [users[m] for m in subtree if m in users]
        if times:
            trait_times[account_id] = min((t for t in times if t is not None), default=None)
    return trait_times


def _at_day(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def _at_ms(ms: int | None) -> datetime | None:
    return datetime.fromtimestamp(ms / 1000, tz=UTC) if ms is not None else None


def activation_progress(
    *, workspace: Workspace, target: str, ids: Sequence[int]
) -> dict[int, Activation]:
    """Per account (`target` "account") or user id: the share of steps done and each step."""
    steps = workspace_activation(workspace_id=workspace.id)[f"{target}s"]
    if not ids or not steps:
        return {subject_id: Activation(None, []) for subject_id in ids}
    events = [name for kind, name in map(step_parts, steps) if kind == "event"]
    if target == "user":
        covered = {i: {i} for i in ids}
        owner = "user_id"
    else:  # an account's users are its own and its descendants' (engagement/hierarchy)
        covered = account_subtrees(ids)
        owner = "user__memberships__account_id"
    members = set().union(*covered.values())
    sent = _first_sent(workspace.product_id, events, owner, members) if events else {}
    first_sent = {
        (subject_id, name): min(
            (sent[(i, name)] for i in covered[subject_id] if (i, name) in sent), default=None
        )
        for subject_id in ids
        for name in events
    }
    trait_times: dict[str, dict[int, int | None]] = {}
    for kind, name in map(step_parts, steps):
        if kind != "trait":
            continue
        if target == "user":
            trait_times[name] = _trait_set(User, "id", name, ids)
        else:
            trait_times[name] = _account_trait_set(name, covered)
    progress = {}
    for subject_id in ids:
        done = []
        for step in steps:
            kind, name = step_parts(step)
            if kind == "event":
                day = first_sent.get((subject_id, name))
                done.append(StepDone(step, day is not None, _at_day(day) if day else None))
            else:
                times = trait_times[name]
                done.append(StepDone(step, subject_id in times, _at_ms(times.get(subject_id))))
        progress[subject_id] = Activation(sum(s.done for s in done) / len(done), done)
    return progress
