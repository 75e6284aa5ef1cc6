"""Admin: products, workspaces (scoring settings with weights inline), segments, and the data."""

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, TextField, Value
from django.db.models.functions import Coalesce, Concat, NullIf, Trim

from engagement.admin_scoping import ManagedProductRowsMixin
from engagement.builtin_segments import builtin_segments_create
from engagement.document_field import DocumentField
from engagement.erasure_admin import ErasureActionMixin
from engagement.input_rules import MAX_CONDITIONS, MAX_DAYS, MAX_WHOLE
from engagement.memberships import products_managed_by
from engagement.models import (
    Account,
    AccountScore,
    Erasure,
    EventName,
    EventWeight,
    Membership,
    Product,
    ProductMembership,
    ScoringState,
    Segment,
    SegmentMember,
    User,
    UserScore,
    Workspace,
)
from engagement.presentation import account_name, user_name
from engagement.scored_admin import ScoredListMixin, trait
from engagement.segment_conditions import (
    ACCOUNT_METRICS,
    OPERATORS,
    segment_conditions_faults,
)
from engagement.services import product_create
from engagement.stored_json import read_traits
from engagement.workspace_config import (
    account_filter_faults,
    daily_event_cap_fault,
    event_name_fault,
    name_fault,
    weight_fault,
)


class ProductMembershipInline(admin.TabularInline):
    """Who sees this product in the dashboard: viewers read, managers also configure it. Its
    managers see the list; granting access (choosing among every login) is a superuser's."""

    model = ProductMembership
    extra = 1
    autocomplete_fields = ["user"]
    fields = ["user", "role", "created_at"]
    readonly_fields = ["created_at"]

    def has_view_permission(self, request, obj=None):
        if super().has_view_permission(request, obj):
            return True
        managed = products_managed_by(request.user)
        # Without a product (the inline's queryset is asked so), any manager: the formset then
        # holds the members of the product on the page only, one the manager may open.
        return managed.exists() if obj is None else managed.filter(pk=obj.pk).exists()


@admin.register(Product)
class ProductAdmin(ManagedProductRowsMixin, admin.ModelAdmin):
    """Superusers add products; a product's managers view and rename their own."""

    product_field = "pk"
    managers_may = ("change",)
    list_display = ["id", "name", "created_at"]
    search_fields = ["name"]
    inlines = [ProductMembershipInline]

    def get_inlines(self, request, obj):
        # Members are granted on an existing product: the add page only names it.
        return self.inlines if obj is not None else []

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        # A product starts with one workspace: the service creates both.
        product, _ = product_create(name=form.cleaned_data["name"])
        obj.pk = product.pk
        obj.refresh_from_db()


def _refused_unless_fine(value, fault_of):
    """The cleaned value, or a form error with the words every surface uses for its fault."""
    fault = fault_of(value)
    if fault:
        raise ValidationError(fault[:1].upper() + fault[1:] + ".")
    return value


class EventWeightForm(forms.ModelForm):
    """A weight as the configuration document takes it (engagement/workspace_config)."""

    class Meta:
        model = EventWeight
        fields = ["event_name", "weight"]

    def clean_event_name(self):
        return _refused_unless_fine(self.cleaned_data.get("event_name"), event_name_fault)

    def clean_weight(self):
        return _refused_unless_fine(self.cleaned_data.get("weight"), weight_fault)


class EventWeightInline(admin.TabularInline):
    """Weights 0-10 (0 excludes); names the product has sent are offered in the list."""

    model = EventWeight
    form = EventWeightForm
    extra = 3

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        if obj is not None:
            names = set(
                EventName.objects.filter(product_id=obj.product_id).values_list("name", flat=True)
            )
            names |= set(obj.weights.values_list("event_name", flat=True))
            formset.form.base_fields["event_name"].widget = forms.Select(
                choices=[("", "---------")] + [(name, name) for name in sorted(names)]
            )
        return formset


class WorkspaceForm(forms.ModelForm):
    """The settings under the configuration document's rules (engagement/workspace_config), so a
    value the document refuses is a form error here too."""

    class Meta:
        model = Workspace
        fields = ["product", "name", "lookback_days", "daily_event_cap", "account_filter"]
        field_classes = {"account_filter": DocumentField}
        help_texts = {
            "daily_event_cap": "At most this many of one event per user per day count "
            f"(1 to {MAX_WHOLE:,}). Empty: no cap.",
            "account_filter": "Only accounts whose traits all match score here, e.g. "
            '{"plan": "enterprise", "am.hosting": "Cloud"}: text, numbers, true/false or null, '
            f"at most {MAX_CONDITIONS} traits. {{}} scores every account.",
        }

    def clean_name(self):
        return _refused_unless_fine(self.cleaned_data.get("name"), name_fault)

    def clean_daily_event_cap(self):
        return _refused_unless_fine(self.cleaned_data.get("daily_event_cap"), daily_event_cap_fault)

    def clean_account_filter(self):
        value = self.cleaned_data.get("account_filter")
        value = {} if value is None else value
        faults = account_filter_faults(value, path="")
        if faults:
            raise ValidationError(faults)
        return value


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    """Changing the settings or the weights rescores the workspace once the save commits."""

    form = WorkspaceForm
    list_display = ["id", "name", "product", "lookback_days", "daily_event_cap", "updated_at"]
    list_filter = ["product"]
    inlines = [EventWeightInline]
    readonly_fields = ["scoring_status"]

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields + (["product"] if obj else [])

    @admin.display(description="Scoring")
    def scoring_status(self, obj):
        state = ScoringState.objects.filter(workspace=obj).first() if obj else None
        if state is None or state.refreshed_at is None:
            return "Not scored yet."
        return (
            f"Refreshed {state.refreshed_at:%Y-%m-%d %H:%M:%S} UTC in {state.last_refresh_ms} ms; "
            f"last full rescore {state.full_rescored_at:%Y-%m-%d %H:%M:%S} UTC in "
            f"{state.last_full_rescore_ms} ms; p90 of raw scores {state.p90:g} "
            f"(previous period {state.previous_p90:g})."
        )

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if not change:  # a new workspace starts with the built-in segments
            builtin_segments_create(workspace=obj)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        from engagement.tasks import workspace_rescore

        workspace_id = form.instance.id
        transaction.on_commit(lambda: workspace_rescore.delay(workspace_id))


class SegmentForm(forms.ModelForm):
    """A segment under the configuration document's rules: its name, and its conditions by
    engagement/segment_conditions (a fault per value, `conditions[0].value: ...`)."""

    class Meta:
        model = Segment
        fields = ["workspace", "name", "target", "match", "conditions"]
        field_classes = {"conditions": DocumentField}
        help_texts = {
            "conditions": f"A list of at most {MAX_CONDITIONS}; all of them must hold, or any one "
            "with match 'any'. "
            '[{"field": "trait:am.status", "operator": "equals", "value": "active"}, '
            '{"field": "metric:engagement_score", "operator": "greater_than", "value": 50}]. '
            f"Operators: {', '.join(OPERATORS)}. Metrics: {', '.join(ACCOUNT_METRICS)} "
            "(active_users, total_users, active_user_share: accounts only). Events: "
            '{"field": "event:Login", "operator": "count_at_least", "value": 3, '
            '"within_last_days": 14}. '
            'A group, one of whose conditions must hold: {"any": [condition, ...]}. '
            f"Days: 0 to {MAX_DAYS:,} (within_next_days: from 1).",
        }

    def clean_name(self):
        return _refused_unless_fine(self.cleaned_data.get("name"), name_fault)

    def clean_conditions(self):
        value = self.cleaned_data.get("conditions")
        return [] if value is None else value

    def clean(self):
        super().clean()
        cleaned = self.cleaned_data  # what ModelForm.clean returns
        target = cleaned.get("target")
        conditions = cleaned.get("conditions")
        if target and "conditions" in cleaned:
            faults = segment_conditions_faults(target=target, conditions=conditions)
            if faults:
                self.add_error("conditions", faults)
        return cleaned


@admin.register(Segment)
class SegmentAdmin(admin.ModelAdmin):
    """Members are recomputed once the save commits, and after every score refresh."""

    form = SegmentForm
    list_display = ["id", "name", "workspace", "target", "match", "builtin", "member_count"]
    list_filter = ["workspace", "target", "builtin"]
    list_select_related = ["workspace__product"]
    search_fields = ["name"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(member_total=Count("members"))

    @admin.display(description="Members", ordering="member_total")
    def member_count(self, obj):
        return obj.member_total

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        from engagement.tasks import segment_members_refresh

        segment_id = obj.id
        transaction.on_commit(lambda: segment_members_refresh.delay(segment_id))


@admin.register(SegmentMember)
class SegmentMemberAdmin(admin.ModelAdmin):
    """Read-only: who is in which segment and since when."""

    list_display = ["segment", "account", "user", "joined_at"]
    list_filter = ["segment"]
    list_select_related = ["segment", "account", "user"]
    raw_id_fields = ["account", "user"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class MembershipInline(admin.TabularInline):
    """The user's accounts, read-only (links come from ingestion)."""

    model = Membership
    extra = 0
    fields = readonly_fields = ("account", "linked_at")
    can_delete = False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("account")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(User)
class UserAdmin(ErasureActionMixin, ScoredListMixin, admin.ModelAdmin):
    erasure_kind = Erasure.Kind.USER
    actions = ["erase"]
    score_model = UserScore
    score_subject = "user"
    searched_traits = ["name", "firstName", "lastName"]
    searched_fields = ["email"]

    list_display = [
        "tracking_id",
        "name",
        "email",
        "score",
        "score_change",
        "rank",
        "last_seen",
        "product",
        "identified",
    ]
    list_filter = ["product", "identified"]
    list_select_related = ["product"]
    search_fields = ["tracking_id"]  # shows the search box; get_search_results does the search
    search_help_text = "Name, email or tracking id."
    fields = readonly_fields = (
        "product",
        "tracking_id",
        "email",
        "identified",
        "first_seen_at",
        "last_seen_at",
        "traits_table",
    )
    inlines = [MembershipInline]

    def name_expression(self):
        text = TextField()
        full = NullIf(
            Trim(
                Concat(
                    Coalesce(trait("firstName"), Value(""), output_field=text),
                    Value(" "),
                    Coalesce(trait("lastName"), Value(""), output_field=text),
                    output_field=text,
                )
            ),
            Value(""),
            output_field=text,
        )
        return Coalesce(trait("name"), full, output_field=text)

    def presented_name(self, obj) -> str | None:
        return user_name(read_traits(obj), obj.email)


@admin.register(Account)
class AccountAdmin(ErasureActionMixin, ScoredListMixin, admin.ModelAdmin):
    erasure_kind = Erasure.Kind.ACCOUNT
    actions = ["erase"]
    score_model = AccountScore
    score_subject = "account"
    searched_traits = ["name", "domain", "website", "email"]
    searched_fields = []

    list_display = [
        "tracking_id",
        "name",
        "domain",
        "score",
        "score_change",
        "rank",
        "last_seen",
        "product",
        "identified",
    ]
    list_filter = ["product", "identified"]
    list_select_related = ["product"]
    search_fields = ["tracking_id"]  # shows the search box; get_search_results does the search
    search_help_text = "Name, domain, email or tracking id."
    fields = readonly_fields = (
        "product",
        "tracking_id",
        "identified",
        "created_at",
        "updated_at",
        "traits_table",
    )

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(display_domain=trait("domain"))

    def presented_name(self, obj) -> str | None:
        return account_name(read_traits(obj))

    @admin.display(description="Domain", ordering="display_domain")
    def domain(self, obj):
        return obj.display_domain or "-"
