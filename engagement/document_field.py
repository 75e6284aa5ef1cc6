"""A form field for JSON a person types (the admin's account filter and segment conditions):
read by input_rules.document_load, so that NaN, 1e400 or deep nesting is a form error with its
reason, never a 500 (forms.JSONField reads NaN and lets a RecursionError through)."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError
from django.forms.fields import InvalidJSONInput, JSONString

from engagement.input_rules import DocumentError, document_load


class DocumentField(forms.JSONField):
    def to_python(self, value):
        if self.disabled:
            return value
        if value in self.empty_values:
            return None
        if isinstance(value, list | dict | int | float | JSONString):
            return value
        try:
            converted = document_load(value)
        except DocumentError as error:
            raise ValidationError(str(error), code="invalid") from None
        return JSONString(converted) if isinstance(converted, str) else converted

    def bound_data(self, data, initial):
        # The form shown again after a fault: what was typed, unless it reads as a document.
        if self.disabled:
            return initial
        if data is None:
            return None
        try:
            return document_load(data)
        except DocumentError:
            return InvalidJSONInput(data)
