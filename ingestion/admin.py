from django.contrib import admin, messages

from engagement.admin_scoping import PRODUCT_FILTER, ManagedProductRowsMixin
from ingestion.models import AcceptedRequest, DroppedRequest, IngestionKey, SeenMessage
from ingestion.services.keys import ingestion_key_create, ingestion_key_revoke


@admin.register(IngestionKey)
class IngestionKeyAdmin(ManagedProductRowsMixin, admin.ModelAdmin):
    """A product's managers add, relabel and revoke their own product's keys (never delete)."""

    managers_may = ("add", "change")
    list_display = ["key", "fingerprint", "product", "label", "created_at", "revoked_at"]
    list_filter = [PRODUCT_FILTER, ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["label", "product__name"]
    readonly_fields = ["key", "created_at", "revoked_at"]
    fields = ["product", "label", "key", "allowed_origins", "created_at", "revoked_at"]
    actions = ["revoke"]

    list_select_related = ["product"]

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields + (["product"] if obj else [])

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        key = ingestion_key_create(
            product_id=form.cleaned_data["product"].id,
            label=form.cleaned_data["label"],
            allowed_origins=form.cleaned_data["allowed_origins"],
        )
        obj.pk = key.pk
        obj.refresh_from_db()

    @admin.action(description="Revoke selected keys (requests sent with them are dropped)")
    def revoke(self, request, queryset):
        active = list(queryset.filter(revoked_at__isnull=True).values_list("id", flat=True))
        for key_id in active:
            ingestion_key_revoke(key_id=key_id)
        self.message_user(request, f"Revoked {len(active)} key(s).", messages.SUCCESS)


@admin.register(DroppedRequest)
class DroppedRequestAdmin(ManagedProductRowsMixin, admin.ModelAdmin):
    """Every request answered and then not applied, with its reason. Read-only. A product's
    managers see its own (a key no product has drops rows of no product: superusers see those)."""

    list_display = [
        "dropped_at",
        "reason",
        "endpoint",
        "product",
        "key_fingerprint",
        "message_count",
        "item_index",
        "detail",
    ]
    list_filter = ["reason", "endpoint", PRODUCT_FILTER]
    date_hierarchy = "dropped_at"
    search_fields = ["detail", "=key_fingerprint"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(AcceptedRequest)
class AcceptedRequestAdmin(ManagedProductRowsMixin, admin.ModelAdmin):
    """The backlog: accepted requests a worker has not applied yet (a row may hold several
    under one key, see AcceptedRequest). Read-only. A product's managers see those sent with
    their product's keys."""

    def managed_rows(self, queryset, products):
        keys = IngestionKey.objects.filter(product__in=products.values("pk")).values("digest")
        return queryset.filter(key_digest__in=keys)

    list_display = ["id", "received_at", "endpoint", "request_count"]
    list_filter = ["endpoint"]
    exclude = ["key_digest"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(SeenMessage)
class SeenMessageAdmin(admin.ModelAdmin):
    """Segment messageIds already applied, kept INGESTION_DEDUP_DAYS days. Read-only."""

    list_display = ["message_id", "product", "seen_at"]
    list_filter = ["product"]
    search_fields = ["message_id"]
    date_hierarchy = "seen_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
