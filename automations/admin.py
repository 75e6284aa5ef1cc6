"""Automations in the admin, for staff who manage the product: create, edit, test, rotate the
secret, replay. The URL and the signing secret are write-only: never rendered back (a Slack URL
is a credential); a new secret is shown once, in the message after saving or rotating."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.views.decorators.debug import sensitive_variables

from automations import delivery as deliveries
from automations.models import Automation, Delivery, DeliveryAttempt
from automations.services import (
    automation_create,
    automation_secret_rotate,
    automation_test_send,
    automation_update,
    automation_validate,
)
from engagement.memberships import products_managed_by

_SETTINGS = [
    "workspace",
    "name",
    "trigger",
    "target",
    "threshold",
    "segment",
    "days",
    "conditions",
    "match",
    "destination",
    "cooldown_seconds",
    "enabled",
]


class AutomationForm(forms.ModelForm):
    receiver_url = forms.CharField(
        label="URL",
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="The receiver's URL, or the Slack incoming-webhook URL. Stored encrypted and "
        "never shown again; leave empty to keep the current one.",
    )

    class Meta:
        model = Automation
        fields = _SETTINGS

    def clean(self):
        cleaned = super().clean()
        if self.instance.pk is None and not cleaned.get("receiver_url"):
            self.add_error("receiver_url", "A new automation needs a URL.")
            return cleaned
        candidate = Automation(**{name: cleaned.get(name) for name in _SETTINGS})
        candidate.url = cleaned.get("receiver_url") or self.instance.url
        try:
            automation_validate(candidate)
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                target = "receiver_url" if field == "url" else field
                self.add_error(target if target in self.fields else None, errors)
        return cleaned


class _ManagedMixin:
    def _workspaces(self, request):
        return products_managed_by(request.user).values("workspaces")

    def has_module_permission(self, request):
        return products_managed_by(request.user).exists()

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)


class AttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    fields = ["attempted_at", "status_code", "latency_ms", "error", "response_excerpt"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Automation)
class AutomationAdmin(_ManagedMixin, admin.ModelAdmin):
    form = AutomationForm
    list_display = ["name", "workspace", "trigger", "target", "destination", "enabled"]
    list_filter = ["trigger", "destination", "enabled"]
    readonly_fields = ["disabled_reason", "created_at"]
    actions = ["send_test", "rotate_secret"]

    def get_queryset(self, request):
        rows = super().get_queryset(request).select_related("workspace__product")
        return rows.filter(workspace__in=self._workspaces(request))

    def has_add_permission(self, request):
        return self.has_module_permission(request)

    def has_change_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_delete_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "workspace":
            kwargs["queryset"] = db_field.related_model.objects.filter(
                id__in=self._workspaces(request)
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @sensitive_variables("url")
    def save_model(self, request, obj, form, change):
        url = form.cleaned_data.get("receiver_url")
        values = {name: form.cleaned_data.get(name) for name in _SETTINGS}
        if change:
            if url:
                values["url"] = url
            automation_update(automation=obj, **values)
            return
        enabled = values.pop("enabled")
        created = automation_create(url=url, **values)
        if not enabled:
            automation_update(automation=created, enabled=False)
        obj.pk = created.pk
        if created.secret:
            self.message_user(
                request,
                f"Signing secret (shown once): {created.secret}",
                messages.WARNING,
            )

    @admin.action(description="Send a test event")
    def send_test(self, request, queryset):
        for automation in queryset:
            automation_test_send(automation=automation)
        self.message_user(request, f"Test events queued for {queryset.count()} automation(s).")

    @admin.action(description="Rotate the signing secret (the old one signs for 24 hours)")
    def rotate_secret(self, request, queryset):
        for automation in queryset.filter(destination=Automation.Destination.WEBHOOK):
            secret = automation_secret_rotate(automation=automation)
            self.message_user(
                request, f"{automation.name}: new secret (shown once): {secret}", messages.WARNING
            )


@admin.register(Delivery)
class DeliveryAdmin(_ManagedMixin, admin.ModelAdmin):
    list_display = ["id", "automation", "event_type", "status", "attempts", "created_at"]
    list_filter = ["status", "event_type"]
    fields = ["id", "automation", "event_type", "status", "attempts", "created_at", "payload"]
    readonly_fields = fields
    inlines = [AttemptInline]
    actions = ["replay"]

    def get_queryset(self, request):
        rows = super().get_queryset(request).select_related("automation")
        return rows.filter(automation__workspace__in=self._workspaces(request))

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.action(description="Replay (same webhook-id)")
    def replay(self, request, queryset):
        for delivery in queryset:
            deliveries.delivery_replay(delivery=delivery)
        self.message_user(request, f"{queryset.count()} delivery(ies) queued again.")
