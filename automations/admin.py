"""Automations in the admin, for staff who manage the product: create, edit, test, rotate the
secret, switch off, replay. The URL and the signing secret are write-only: never rendered back (a
Slack URL is a credential); a new secret is shown once, in the message after saving or rotating.
Settings are checked by the service's one rule (automations.services.automation_faults), every
fault shown on the form; switching off, from the form or the action, cancels pending
deliveries (automation_switch_off)."""

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html
from django.views.decorators.debug import sensitive_variables

from automations import delivery as deliveries
from automations.display import cooldown_hours, cooldown_shown, delivery_body_shown
from automations.forms import ConditionsField, faults_shown
from automations.models import Automation, Delivery, DeliveryAttempt, TraitSync
from automations.services import (
    COOLDOWN_MAX_DAYS,
    automation_changed,
    automation_create,
    automation_faults,
    automation_new,
    automation_secret_rotate,
    automation_switch_off,
    automation_test_send,
    automation_update,
    cooldown_seconds_of,
    switched_off_reason,
)
from automations.trait_sync import trait_sync_faults, trait_sync_switch
from config.admin_lookups import ObjectIdAdminMixin
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
    "enabled",
]
# The settings automation_faults checks (the workspace is chosen from a list; on/off is a switch;
# the cool-down is typed in hours, checked as cooldown_seconds).
_CHECKED = [name for name in _SETTINGS if name not in ("workspace", "enabled")]


class AutomationForm(forms.ModelForm):
    receiver_url = forms.CharField(
        label="URL",
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="The receiver's URL, or the Slack incoming-webhook URL. Stored encrypted and "
        "never shown again; leave empty to keep the current one.",
    )
    conditions = ConditionsField(
        required=False, help_text="JSON, as segments: a list of at most 50 conditions."
    )
    # Hours, as on the dashboard and in automation_create; the model keeps seconds.
    cooldown_hours = forms.FloatField(
        label="Cool-down (hours)",
        initial=24,
        help_text=f"A subject fires at most once per cool-down: 0 to {COOLDOWN_MAX_DAYS * 24:,} "
        "hours (a year); 0.5 is 30 minutes.",
    )

    class Meta:
        model = Automation
        fields = _SETTINGS

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            hours = cooldown_hours(self.instance.cooldown_seconds)
            self.initial.setdefault("cooldown_hours", hours)

    def cooldown_seconds(self) -> int | float | None:
        """The cool-down read, in seconds (None: it could not be read)."""
        hours = self.cleaned_data.get("cooldown_hours")
        return None if hours is None else cooldown_seconds_of(hours)

    def clean(self):
        super().clean()
        cleaned = self.cleaned_data  # what ModelForm.clean returns
        if self.instance.pk is None and not cleaned.get("receiver_url"):
            self.add_error("receiver_url", "A new automation needs a URL.")
            return cleaned
        # The settings that were read; one that was not has its own fault already.
        values = {name: cleaned[name] for name in _CHECKED if name in cleaned}
        if cleaned.get("receiver_url"):
            values["url"] = cleaned["receiver_url"]
        if self.cooldown_seconds() is not None:
            values["cooldown_seconds"] = self.cooldown_seconds()
        if self.instance.pk is None:
            values.setdefault("trigger", "")
            candidate = automation_new(workspace=cleaned.get("workspace"), **values)
        else:
            candidate = automation_changed(self.instance, **values)
        faults_shown(
            self,
            automation_faults(candidate),
            {"url": "receiver_url", "cooldown_seconds": "cooldown_hours"},
        )
        return cleaned


class _ManagedMixin:
    def _workspaces(self, request):
        return products_managed_by(request.user).values("workspaces")

    def has_module_permission(self, request):
        return products_managed_by(request.user).exists()

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)


class _WorkspaceSettingsAdmin(_ManagedMixin, admin.ModelAdmin):
    """A workspace's settings (automations, score syncs): its product's managers add, change
    and delete them, and choose among their own workspaces only."""

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


class AttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    fields = readonly_fields = (
        "attempted_at",
        "status_code",
        "latency_ms",
        "error",
        "response_excerpt",
    )
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Automation)
class AutomationAdmin(_WorkspaceSettingsAdmin):
    form = AutomationForm
    list_display = ["name", "workspace", "trigger", "target", "destination", "cooldown", "enabled"]
    list_filter = ["trigger", "destination", "enabled"]
    readonly_fields = ["disabled_reason", "created_at"]
    actions = ["send_test", "rotate_secret", "switch_off"]

    @admin.display(description="Cool-down", ordering="cooldown_seconds")
    def cooldown(self, obj: Automation) -> str:
        return cooldown_shown(obj.cooldown_seconds)

    @sensitive_variables("url")
    def save_model(self, request, obj, form, change):
        url = form.cleaned_data.get("receiver_url")
        values = {name: form.cleaned_data.get(name) for name in _SETTINGS}
        values["cooldown_seconds"] = form.cooldown_seconds()
        reason = switched_off_reason(where="in the admin", who=request.user.get_username())
        if change:
            if url:
                values["url"] = url
            automation_update(automation=obj, switched_off_because=reason, **values)
            return
        enabled = values.pop("enabled")
        created = automation_create(url=url, **values)
        if not enabled:
            automation_switch_off(automation=created, reason=reason)
        obj.pk = created.pk
        if created.secret:
            self.message_user(
                request,
                f"Signing secret (shown once): {created.secret}",
                messages.WARNING,
            )

    @admin.action(description="Send a test event")
    def send_test(self, request, queryset):
        on = list(queryset.filter(enabled=True))
        for automation in on:
            automation_test_send(automation=automation)
        self.message_user(request, f"Test events queued for {len(on)} automation(s).")
        if len(on) < queryset.count():
            self.message_user(
                request,
                "Automations that are off send nothing; switch them on first.",
                messages.WARNING,
            )

    @admin.action(description="Switch off (cancels their pending deliveries)")
    def switch_off(self, request, queryset):
        reason = switched_off_reason(where="in the admin", who=request.user.get_username())
        cancelled = sum(
            automation_switch_off(automation=automation, reason=reason) for automation in queryset
        )
        self.message_user(
            request,
            f"{queryset.count()} automation(s) off; {cancelled} pending delivery(ies) cancelled.",
        )

    @admin.action(description="Rotate the signing secret (the old one signs for 24 hours)")
    def rotate_secret(self, request, queryset):
        for automation in queryset.filter(destination=Automation.Destination.WEBHOOK):
            secret = automation_secret_rotate(automation=automation)
            self.message_user(
                request, f"{automation.name}: new secret (shown once): {secret}", messages.WARNING
            )


@admin.register(Delivery)
class DeliveryAdmin(ObjectIdAdminMixin, _ManagedMixin, admin.ModelAdmin):
    list_display = ["id", "automation", "event_type", "status", "attempts", "created_at"]
    list_filter = ["status", "event_type"]
    ordering = ["-created_at", "-id"]  # newest first, as on the automation's page
    fields = readonly_fields = (
        "id",
        "automation",
        "event_type",
        "status",
        "attempts",
        "created_at",
        "finished_at",
        "body",
    )
    inlines = [AttemptInline]
    actions = ["replay"]

    @admin.display(description="Body sent")
    def body(self, obj: Delivery) -> str:
        """The JSON its destination receives, indented, as on the dashboard's delivery page."""
        return format_html("<pre>{}</pre>", delivery_body_shown(obj))

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


class TraitSyncForm(forms.ModelForm):
    """A score sync's settings, checked by the service's rule (trait_sync_faults), every fault
    under its field. The write key is write-only, as an automation's URL."""

    host = forms.CharField(help_text="e.g. https://api.segment.io, or a RudderStack data plane.")
    new_write_key = forms.CharField(
        label="Write key",
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Stored encrypted and never shown again; leave empty to keep the current one.",
    )

    class Meta:
        model = TraitSync
        fields = ["workspace", "host", "interval_minutes", "prefix", "enabled"]

    def clean(self):
        super().clean()
        cleaned = self.cleaned_data  # what ModelForm.clean returns
        faults = trait_sync_faults(
            host=cleaned.get("host"),
            write_key=cleaned.get("new_write_key") or self.instance.write_key or "",
            interval_minutes=cleaned.get("interval_minutes"),
            prefix=cleaned.get("prefix"),
        )
        for field, fault in faults.items():
            name = "new_write_key" if field == "write_key" else field
            if name not in self.errors:  # a field that could not be read has its own fault
                self.add_error(name, fault)
        return cleaned


@admin.register(TraitSync)
class TraitSyncAdmin(_WorkspaceSettingsAdmin):
    """Switching a sync off (the form's box or the action) stops it: no run starts once the
    change commits, and a run under way stops before its next batch."""

    form = TraitSyncForm
    list_display = ["id", "workspace", "host", "interval_minutes", "enabled", "synced_through"]
    list_filter = ["enabled"]
    readonly_fields = ["synced_through", "last_error", "created_at"]
    actions = ["switch_off", "switch_on"]

    @sensitive_variables("write_key")
    def save_model(self, request, obj, form, change):
        write_key = form.cleaned_data.get("new_write_key")
        if write_key:
            obj.write_key = write_key.strip()
        obj.host = obj.host.strip().rstrip("/")
        if change:  # a run's watermark and error, written meanwhile, are the run's to keep
            obj.save(update_fields=[*TraitSyncForm.Meta.fields, "write_key"])
        else:
            obj.save()

    @admin.action(description="Switch off (no run starts; a run under way stops)")
    def switch_off(self, request, queryset):
        for sync in queryset:
            trait_sync_switch(sync=sync, enabled=False)
        self.message_user(request, f"{queryset.count()} score sync(s) switched off.")

    @admin.action(description="Switch on")
    def switch_on(self, request, queryset):
        for sync in queryset:
            trait_sync_switch(sync=sync, enabled=True)
        self.message_user(request, f"{queryset.count()} score sync(s) switched on.")
