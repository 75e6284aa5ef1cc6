"""The marketplace connection in the admin: connect, pick the app, sync now, test, disconnect.

Who sees what: superusers see every connection; other staff see the connections of the products
they are a manager of (the membership granted on the product's admin page). The API token is a
write-only field: it is never rendered back.
"""

from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.utils.html import format_html, format_html_join
from django.views.decorators.debug import sensitive_post_parameters, sensitive_variables

from engagement.models import Product
from marketplace import selectors, services
from marketplace.client import MarketplaceError
from marketplace.models import MarketplaceConnection, SyncRun

_RUN_FIELDS = [
    "started_at",
    "finished_at",
    "trigger",
    "mode",
    "last_updated_from",
    "outcome",
    "stage",
    "pages",
    "licenses_seen",
    "accounts_matched",
    "accounts_created",
    "accounts_updated",
    "skipped_without_cloud_id",
    "transactions_seen",
    "transactions_skipped",
    "feedback_seen",
    "skipped_invalid",
    "retries",
    "note",
    "error",
]


class ConnectionForm(forms.ModelForm):
    """All four values on every save: email, API token, vendor ID and the app."""

    api_token = forms.CharField(
        label="API token",
        widget=forms.PasswordInput(render_value=False),
        strip=True,
        help_text="Created in the marketplace account; stored encrypted and never shown again. "
        "Enter it to save the connection details (also to replace an expired token); leave it "
        "empty on a saved connection to change only the day the token was set.",
    )
    app = forms.CharField(
        label="App",
        required=False,
        help_text="The app's key or name. Leave empty and save to pick from the vendor's apps.",
    )

    class Meta:
        model = MarketplaceConnection
        fields = ["product", "email", "vendor_id", "token_set_on"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["api_token"].required = False
        self.fields["token_set_on"].help_text = (
            "The day the API token was created (YYYY-MM-DD); today when a new token is saved "
            "and this is left as it is. Its age is watched: Atlassian tokens expire within a "
            f"year, and from {selectors.TOKEN_WARN_DAYS} days on this page and the dashboard's "
            "health page warn."
        )
        self.fields["email"].required = True
        self.fields["vendor_id"].required = True
        self.fields[
            "vendor_id"
        ].help_text = "The number at the end of the vendor management page address."
        self.resolved: services.ResolvedApp | None = None
        if self.instance.pk:
            # The app as a person names it (its listing's name), not its productId UUID; also
            # what a save is compared with to tell whether the app changed.
            app = self.instance.app_name or self.instance.marketplace_product_id
            if app:
                self.initial["app"] = app

    def clean_token_set_on(self):
        day = self.cleaned_data.get("token_set_on")
        if day is not None:
            try:
                services.token_set_on_check(day)
            except services.TokenDateError as exc:
                raise forms.ValidationError(str(exc)) from None
        return day

    @method_decorator(sensitive_variables("data"))
    def clean(self):
        data = super().clean()
        assert data is not None  # a ModelForm's clean() returns its cleaned_data
        if self.errors:
            return data
        if self.instance.pk and not data.get("api_token"):
            # No token typed: only the day the token was set may change.
            if {"email", "vendor_id", "app"} & set(self.changed_data):
                self.add_error(
                    "api_token",
                    "Enter the token to change the connection details: it is never shown back.",
                )
            elif data.get("token_set_on") is None and "token_set_on" in self.changed_data:
                self.add_error("token_set_on", "Give the day the stored token was set.")
            return data
        try:
            self.resolved = services.connection_details_check(
                email=data["email"],
                api_token=data["api_token"],
                vendor_id=data["vendor_id"],
                product_id=data.get("app", ""),
                app_key="",
            )
        except services.ConnectionDetailsError as exc:
            if exc.apps:
                # Offer the vendor's apps as a list to pick from on the re-rendered form.
                choices = [("", "---------")] + [
                    (app.product_id, f"{app.app_name} ({app.app_key})") for app in exc.apps
                ]
                self.fields["app"].widget = forms.Select(choices=choices)
            self.add_error(exc.field if exc.field in self.fields else None, exc.message)
            self.add_error("api_token", "Enter the token again: it is never shown back.")
        return data


class RunColumnsMixin:
    """A run in a few columns: the licenses' counts in one, the error cut short (the run's own
    page has every field)."""

    @admin.display(description="licenses")
    def licenses(self, run):
        skipped = run.skipped_without_cloud_id + run.skipped_invalid
        return (
            f"{run.licenses_seen} seen, {run.accounts_matched} matched, "
            f"{run.accounts_created} created, {skipped} skipped"
        )

    @admin.display(description="error")
    def error_short(self, run):
        if not run.error:
            return "-"
        return run.error if len(run.error) <= 120 else run.error[:119] + "…"


_RUN_COLUMNS = ("started_at", "trigger", "mode", "outcome", "licenses", "error_short")


class SyncRunInline(RunColumnsMixin, admin.TabularInline):
    """The connection's recent runs, compact; each links to its own page."""

    model = SyncRun
    extra = 0
    max_num = 0
    can_delete = False
    fields = _RUN_COLUMNS
    readonly_fields = _RUN_COLUMNS
    ordering = ["-started_at"]
    show_change_link = True
    verbose_name_plural = "sync runs of the last 14 days (every run: Marketplace › Sync runs)"

    def get_queryset(self, request):
        since = timezone.now() - timedelta(days=14)
        return super().get_queryset(request).filter(started_at__gte=since)

    def has_change_permission(self, request, obj=None):
        return False


class ManagedProductAdminMixin:
    """Only what the user may manage; superusers manage everything."""

    def has_module_permission(self, request):
        return selectors.products_manageable_by(user=request.user) != []

    def _may(self, request, obj) -> bool:
        allowed = selectors.products_manageable_by(user=request.user)
        if allowed is None:
            return True
        if obj is None:
            return bool(allowed)
        product_id = obj.product_id if hasattr(obj, "product_id") else obj.connection.product_id
        return product_id in allowed

    def has_view_permission(self, request, obj=None):
        return self._may(request, obj)


@admin.register(MarketplaceConnection)
class MarketplaceConnectionAdmin(ManagedProductAdminMixin, admin.ModelAdmin):
    form = ConnectionForm
    list_display = [
        "product",
        "app_name",
        "state",
        "last_success_at",
        "last_error_short",
        "schedule",
    ]
    list_filter = ["state"]
    search_fields = ["product__name", "app_name", "email"]
    readonly_fields = [
        "state",
        "app_name",
        "marketplace_product_id",
        "developer_id",
        "api_url",
        "last_success_at",
        "last_error",
        "last_error_at",
        "full_sync_completed_at",
        "schedule",
        "created_at",
    ]
    inlines = [SyncRunInline]
    actions = ["sync_now", "test_connection", "disconnect"]

    @method_decorator(sensitive_post_parameters("api_token"))
    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        return super().changeform_view(request, object_id, form_url, extra_context)

    def get_inlines(self, request, obj):
        # A connection being added has no runs yet.
        return self.inlines if obj is not None else []

    def get_fields(self, request, obj=None):
        editable = ["product", "email", "api_token", "token_set_on", "vendor_id", "app"]
        return editable + (["token_age", *self.readonly_fields] if obj else [])

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields + (["product", "token_age"] if obj else [])

    def change_view(self, request, object_id, form_url="", extra_context=None):
        if request.method == "GET":
            connection = self.get_object(request, object_id)
            warning = connection and selectors.token_warning(connection)
            if warning:
                self.message_user(request, warning, messages.WARNING)
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.display(description="token age")
    def token_age(self, obj):
        age = selectors.token_age_days(obj)
        if age is None:
            return "-"
        warning = selectors.token_warning(obj)
        text = f"{age} days (set on {obj.token_set_on.isoformat()})"
        return format_html("{} <strong>{}</strong>", text, warning) if warning else text

    def get_queryset(self, request):
        return selectors.connections_for(user=request.user).select_related("periodic_task")

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "product":
            allowed = selectors.products_manageable_by(user=request.user)
            products = Product.objects.filter(marketplace_connection__isnull=True)
            if allowed is not None:
                products = products.filter(id__in=allowed)
            kwargs["queryset"] = products
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_add_permission(self, request):
        return self._may(request, None)

    def has_change_permission(self, request, obj=None):
        return self._may(request, obj)

    def has_delete_permission(self, request, obj=None):
        return self._may(request, obj)

    def save_model(self, request, obj, form, change):
        resolved = form.resolved
        chosen_day = (
            form.cleaned_data.get("token_set_on") if "token_set_on" in form.changed_data else None
        )
        if resolved is None:  # no token typed: only the day the token was set
            if chosen_day is not None:
                services.connection_token_set_on_update(
                    connection_id=obj.pk, token_set_on=chosen_day
                )
            obj.refresh_from_db()
            self.message_user(
                request,
                "Saved the day the token was set; the token and details are unchanged.",
                messages.SUCCESS,
            )
            return
        connection = services.connection_configure(
            product_id=obj.product_id,
            email=form.cleaned_data["email"],
            api_token=form.cleaned_data["api_token"],
            vendor_id=form.cleaned_data["vendor_id"],
            developer_id=resolved.developer_id,
            marketplace_product_id=resolved.product_id,
            app_name=resolved.app_name,
            token_set_on=chosen_day,
        )
        obj.pk = connection.pk
        obj.refresh_from_db()
        self.message_user(
            request,
            f"Connected to {resolved.app_name}; the first full sync has started.",
            messages.SUCCESS,
        )

    @admin.display(description="last error")
    def last_error_short(self, obj):
        if not obj.last_error:
            return "-"
        age = timezone.now() - obj.last_error_at if obj.last_error_at else None
        when = f" ({int(age.total_seconds() // 60)} min ago)" if age else ""
        return format_html("{}{}", obj.last_error[:120], when)

    @admin.display(description="schedule")
    def schedule(self, obj):
        task = obj.periodic_task
        if task is None:
            return "none"
        return f"every {services.SYNC_INTERVAL_HOURS} h" if task.enabled else "paused"

    @admin.action(description="Sync now (all licenses, sales and uninstalls)")
    def sync_now(self, request, queryset):
        for connection in queryset:
            result = services.connection_sync_request(
                connection_id=connection.id, trigger=SyncRun.Trigger.MANUAL
            )
            level = messages.SUCCESS if result.started else messages.WARNING
            self.message_user(request, f"{connection.product}: {result.message}", level)

    @admin.action(description="Test connection")
    def test_connection(self, request, queryset):
        for connection in queryset:
            try:
                message = services.connection_test(connection_id=connection.id)
            except MarketplaceError as exc:
                self.message_user(request, f"{connection.product}: {exc.message}", messages.ERROR)
            else:
                self.message_user(request, f"{connection.product}: {message}", messages.SUCCESS)

    @admin.action(description="Disconnect (imported am. traits stay)")
    def disconnect(self, request, queryset):
        count = services.connections_disconnect(
            connection_ids=list(queryset.values_list("id", flat=True))
        )
        self.message_user(
            request, f"Disconnected {count} connection(s); future syncs stopped.", messages.SUCCESS
        )


@admin.register(SyncRun)
class SyncRunAdmin(RunColumnsMixin, ManagedProductAdminMixin, admin.ModelAdmin):
    """Every run, read-only: a few columns in the list, every field on a run's page."""

    list_display = ["connection", *_RUN_COLUMNS]
    list_filter = ["connection__product", "outcome", "trigger", "mode"]
    readonly_fields = [
        "connection",
        *_RUN_FIELDS,
        "skip_reasons",
        "attempts",
        "retry_at",
        "heartbeat_at",
    ]
    exclude = ["next_url", "skipped_reasons"]

    @admin.display(description="why licenses were skipped (first 100)")
    def skip_reasons(self, obj):
        if not obj.skipped_reasons:
            return "-"
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "",
                "<li>{}: {} {}</li>",
                ((r["license"], r["field"], r["reason"]) for r in obj.skipped_reasons),
            ),
        )

    def get_queryset(self, request):
        runs = super().get_queryset(request).select_related("connection__product")
        allowed = selectors.products_manageable_by(user=request.user)
        return runs if allowed is None else runs.filter(connection__product_id__in=allowed)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
