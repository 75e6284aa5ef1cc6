from django.contrib import admin

from engagement.models import Account, Membership, Product, User, Workspace


@admin.register(Product)
class ProductAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "created_at"]
    search_fields = ["name"]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if not change:  # a product starts with one workspace, however it is created
            Workspace.objects.get_or_create(product=obj, defaults={"name": "Default"})


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "product", "lookback_days", "updated_at"]
    list_filter = ["product"]


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    readonly_fields = ["user", "account", "linked_at"]
    can_delete = False


@admin.register(User)
class UserAdmin(admin.ModelAdmin):
    list_display = ["tracking_id", "email", "product", "identified", "last_seen_at"]
    list_filter = ["product", "identified"]
    search_fields = ["tracking_id", "email"]
    readonly_fields = [
        "product",
        "tracking_id",
        "traits",
        "identified",
        "email",
        "first_seen_at",
        "last_seen_at",
    ]
    inlines = [MembershipInline]


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin):
    list_display = ["tracking_id", "product", "identified", "updated_at"]
    list_filter = ["product", "identified"]
    search_fields = ["tracking_id"]
    readonly_fields = ["product", "tracking_id", "traits", "identified"]
