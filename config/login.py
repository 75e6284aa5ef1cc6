"""Sign-in forms of the dashboard and the admin, and the username django-axes records.

Django's AuthenticationForm sets the username's max_length after the field is built, so the
limit only reaches the browser (`maxlength`), never the server's validation: a longer username
went on to authenticate(), and django-axes wrote it into its varchar(255) column, a 500 on
PostgreSQL. Here the limit is validated like any other field's, so a too-long username is a
form error and never reaches axes.
"""

from typing import Any

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.validators import MaxLengthValidator
from django.http import HttpRequest

# axes' username, user agent and path columns are varchar(255); it cuts the user agent and the
# path itself, not the username.
AXES_TEXT_LIMIT = 255


class _BoundedUsername:
    fields: dict[str, Any]  # the form's, from the AuthenticationForm it is mixed into

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["username"]
        field.validators.append(MaxLengthValidator(field.max_length))


class LoginForm(_BoundedUsername, AuthenticationForm):
    """The dashboard's sign-in form."""


class AdminLoginForm(_BoundedUsername, AdminAuthenticationForm):
    """The admin's sign-in form."""


def axes_username(request: HttpRequest, credentials: dict | None) -> str | None:
    """The username axes counts failures under, cut to its column (any other sign-in path that
    calls authenticate() with a longer one is recorded, not a 500)."""
    if credentials:
        username = credentials.get("username")
    else:
        username = getattr(request, "data", request.POST).get("username")
    if username is None:
        return None
    return str(username)[:AXES_TEXT_LIMIT]
