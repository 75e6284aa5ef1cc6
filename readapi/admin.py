from django import forms
from django.contrib import admin, messages
from django.utils import timezone

from readapi.models import ApiToken, generate_token, hash_token


class ApiTokenAddForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ["product", "name"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are shown once, when created; only a hash is kept."""

    list_display = ["name", "prefix", "product", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["product", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix"]
    readonly_fields = ["product", "prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = ApiTokenAddForm
        return super().get_form(request, obj, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj else []

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["product", "name"]
        return ["name", "product", "prefix", "created_at", "last_used_at", "revoked_at"]

    def save_model(self, request, obj, form, change):
        if not change:
            plain = generate_token()
            obj.prefix = plain[:10]
            obj.token_hash = hash_token(plain)
            super().save_model(request, obj, form, change)
            self.message_user(
                request,
                f"API token created: {plain} (copy it now: it is not shown again).",
                messages.WARNING,
            )
            return
        super().save_model(request, obj, form, change)

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)
