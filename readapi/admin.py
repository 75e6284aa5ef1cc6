from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest

from engagement.admin_scoping import PRODUCT_FILTER, ManagedProductRowsMixin
from readapi.models import ApiToken, Scope
from readapi.services import api_token_create, api_token_revoke


class ApiTokenAddForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices,
        initial=[Scope.READ],
        required=False,  # every token reads, whatever is ticked
        widget=forms.CheckboxSelectMultiple,
        help_text="Every token reads; delete also erases users and accounts.",
    )

    class Meta:
        model = ApiToken
        fields = ["product", "name", "scopes"]


@admin.register(ApiToken)
class ApiTokenAdmin(ManagedProductRowsMixin, admin.ModelAdmin):
    """Tokens are shown once, when created; only a hash is kept. A product's managers add,
    rename and revoke their own product's tokens (never delete)."""

    managers_may = ("add", "change")

    list_display = [
        "name",
        "prefix",
        "product",
        "scope_list",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = [PRODUCT_FILTER, ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix"]
    readonly_fields = [
        "product",
        "prefix",
        "scope_list",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    actions = ["revoke"]

    def get_form(
        self, request: HttpRequest, obj: ApiToken | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm]:
        if obj is None:
            kwargs["form"] = ApiTokenAddForm
        return super().get_form(request, obj, change, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj else []

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["product", "name", "scopes"]
        return [
            "name",
            "product",
            "prefix",
            "scope_list",
            "created_at",
            "last_used_at",
            "revoked_at",
        ]

    @admin.display(description="scopes")
    def scope_list(self, token: ApiToken) -> str:
        return ", ".join(token.effective_scopes)

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        token, plain = api_token_create(
            product_id=form.cleaned_data["product"].id,
            name=form.cleaned_data["name"],
            scopes=form.cleaned_data["scopes"],
        )
        obj.pk = token.pk
        obj.refresh_from_db()
        self.message_user(
            request,
            f"API token created: {plain} (copy it now: it is not shown again).",
            messages.WARNING,
        )

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):
        active = list(queryset.filter(revoked_at__isnull=True).values_list("id", flat=True))
        for token_id in active:
            api_token_revoke(token_id=token_id)
        self.message_user(request, f"Revoked {len(active)} token(s).", messages.SUCCESS)
