"""What every API's OpenAPI description shares: the one error body and the pattern of a string
that is not blank. The read API's views and the ingestion paths (ingestion/schema.py) use both."""

from rest_framework import serializers

# A string is trimmed (Python's whitespace) and may hold no NUL, so it needs one character that
# is neither.
SPACE = "\\t-\\r\\x1c- \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
NON_BLANK = f"^[^\\x00]*[^\\x00{SPACE}][^\\x00]*$"


class ErrorSerializer(serializers.Serializer):
    """The one error body of every API."""

    # Its docstring is its description in the OpenAPI documents; config.api_errors.error_body
    # builds it.

    code = serializers.CharField()
    message = serializers.CharField()
    # The serializer's metaclass pops declared fields off the class, so Serializer.fields (the
    # bound fields) stays; the stubs cannot see that.
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()), required=False
    )
