"""OpenAPI description of the read API: Bearer authentication, `expand` lists, and a hook for
what the serializers cannot say (loaded by ReadapiConfig.ready and SPECTACULAR_SETTINGS)."""

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.plumbing import build_bearer_security_scheme_object

from config.openapi import NON_BLANK


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "readapi.authentication.BearerTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema):
        return build_bearer_security_scheme_object(
            header_name="Authorization",
            token_prefix="Bearer",  # noqa: S106 (the scheme name, not a secret)
            bearer_format="eds_...",
        )


class ExpandFieldScheme(OpenApiSerializerFieldExtension):
    """`expand`: a comma-separated list of the field's names (the server refuses any other)."""

    target_class = "readapi.params.ExpandField"

    def map_serializer_field(self, auto_schema, direction):
        return {
            "type": "array",
            "items": {"type": "string", "enum": list(self.target.choices)},
            "minItems": 1,
            "description": self.target.help_text,
        }


# A query string is trimmed (Python's whitespace) and may hold no NUL, so it needs one character
# that is neither (config.openapi).


def postprocess(result, generator, request, public):
    """Postprocessing hook: `expand` is sent comma-separated (`expand=traits,segments`); a query
    string needs a character other than whitespace and no NUL; an optional parameter sent empty
    (`limit=`) counts as absent; a workspace carries `stats` only with expand=stats."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", ()):
                if parameter.get("in") != "query":
                    continue
                if parameter.get("name") == "expand":
                    parameter["style"] = "form"
                    parameter["explode"] = False
                schema = parameter.get("schema", {})
                if schema.get("type") == "string" and "enum" not in schema:
                    schema["pattern"] = NON_BLANK
                if not parameter.get("required"):
                    parameter["allowEmptyValue"] = True
    workspace = result.get("components", {}).get("schemas", {}).get("Workspace")
    if workspace and "stats" in workspace.get("required", ()):
        workspace["required"].remove("stats")
    return result
