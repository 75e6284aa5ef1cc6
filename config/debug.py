"""The exception reporter filter: values marked sensitive are hidden on every error page.

Django's own filter hides them only while DEBUG is off, so a developer's debug page would show
an API token typed into a form. This one hides what `sensitive_variables` and
`sensitive_post_parameters` mark (and settings named like secrets) whatever DEBUG says.
"""

from django.http import HttpRequest
from django.views.debug import SafeExceptionReporterFilter


class AlwaysSafeExceptionReporterFilter(SafeExceptionReporterFilter):
    def is_active(self, request: HttpRequest | None) -> bool:
        return True
