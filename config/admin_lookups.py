"""An object id in an admin address that cannot be an id of its model is "doesn't exist", never
a database error.

The admin looks an object up by the id in its address (`/admin/<app>/<model>/<id>/change/`, its
delete and history pages, and the "View on site" link `/admin/r/<content type>/<id>/`). Django
turns an id its field cannot read (letters for a number, a malformed UUID) into "doesn't exist",
but passes any text to a text primary key, and PostgreSQL refuses a NUL in a string outright: a
500. `is_object_id` is the one check of both lookups: the value the field reads, and for text,
what the column can hold (no NUL, no lone surrogate, at most its length).
"""

from __future__ import annotations

from django.contrib.contenttypes.models import ContentType
from django.contrib.contenttypes.views import shortcut
from django.core.exceptions import ValidationError
from django.db import models
from django.http import Http404, HttpRequest, HttpResponse

from engagement.input_rules import text_problem


def is_object_id(
    model: type[models.Model], object_id: str, field: models.Field | None = None
) -> bool:
    """Whether `object_id` can be the value of `field` (the primary key unless given) of a
    `model` row, so that looking it up answers a row or none, not a database error."""
    field = field or model._meta.pk
    try:
        value = field.to_python(object_id)
    except (ValidationError, ValueError, TypeError):
        return False
    if isinstance(value, str):
        max_length = getattr(field, "max_length", None)
        return text_problem(value) is None and (max_length is None or len(value) <= max_length)
    return True


class ObjectIdAdminMixin:
    """For a ModelAdmin whose model has a text primary key: an id that cannot be one is an
    object that does not exist (the admin's "doesn't exist" message), on the change, delete and
    history pages alike (they all look the object up through `get_object`)."""

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> models.Model | None:
        model = self.model  # type: ignore[attr-defined]
        field = None if from_field is None else model._meta.get_field(from_field)
        if not is_object_id(model, object_id, field):
            return None
        return super().get_object(request, object_id, from_field)  # type: ignore[misc]


def view_on_site(request: HttpRequest, content_type_id: str, object_id: str) -> HttpResponse:
    """The admin's "View on site" link (Django's contenttypes shortcut, which lets a database
    error or a malformed UUID through as a 500): an address that cannot name an object is 404."""
    try:
        model = ContentType.objects.get_for_id(int(content_type_id)).model_class()
    except (ValueError, ContentType.DoesNotExist):
        model = None
    if model is None or not is_object_id(model, object_id):
        raise Http404("No such object.")
    return shortcut(request, content_type_id, object_id)
