"""Admin pages a product's managers use for their own product (its row, ingestion keys, API
tokens, dropped and accepted requests), scoped as the marketplace's and automations' admin pages
are: a staff user who manages products, without Django permissions on the model, sees and acts on
the rows of those products only, and picks among those products in forms and filters.

Superusers, and staff granted the model's Django permissions, keep Django's rules and see every
row. A manager opens a row of another product as a row that does not exist. Used by the admin
modules of engagement, ingestion and readapi (apps never import each other; all import this).
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from engagement.memberships import products_managed_by
from engagement.models import Product


class ManagedProductRowsMixin:
    """Put before admin.ModelAdmin. `product_field` names the row's product (a foreign key to
    Product; "pk" on Product itself); `managers_may` lists what managers do besides viewing:
    "add", "change", "delete"."""

    product_field = "product"
    managers_may: tuple[str, ...] = ()

    def managed_products(self, request: HttpRequest) -> QuerySet[Product]:
        return products_managed_by(request.user)

    def _django_allows(self, request: HttpRequest, action: str) -> bool:
        """Django's own answer: a superuser, or staff with the model's permission."""
        opts = self.opts  # type: ignore[attr-defined]
        return request.user.has_perm(f"{opts.app_label}.{action}_{opts.model_name}")

    def _manages_any(self, request: HttpRequest) -> bool:
        per_request = vars(request)  # the answer, kept for the rest of this request
        if "_manages_products" not in per_request:
            per_request["_manages_products"] = self.managed_products(request).exists()
        return per_request["_manages_products"]

    def _manager_may(self, request: HttpRequest, action: str, obj=None) -> bool:
        if action != "view" and action not in self.managers_may:
            return False
        if not self._manages_any(request):
            return False
        if obj is None:
            return True
        field = "pk" if self.product_field == "pk" else f"{self.product_field}_id"
        product_id = getattr(obj, field)
        return self.managed_products(request).filter(pk=product_id).exists()

    def _scoped(self, request: HttpRequest) -> bool:
        """True when the user sees only the rows of the products they manage."""
        return not self._django_allows(request, "view") and not self._django_allows(
            request, "change"
        )

    def managed_rows(self, queryset: QuerySet, products: QuerySet[Product]) -> QuerySet:
        """The rows of these products (a page whose rows reach the product otherwise overrides)."""
        return queryset.filter(**{f"{self.product_field}__in": products.values("pk")})

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        rows = super().get_queryset(request)  # type: ignore[misc]
        if self._scoped(request):
            return self.managed_rows(rows, self.managed_products(request))
        return rows

    def has_module_permission(self, request: HttpRequest) -> bool:
        allowed = super().has_module_permission(request)  # type: ignore[misc]
        return allowed or self._manages_any(request)

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        allowed = super().has_view_permission(request, obj)  # type: ignore[misc]
        return allowed or self._manager_may(request, "view", obj)

    def has_add_permission(self, request: HttpRequest, *args) -> bool:
        allowed = super().has_add_permission(request, *args)  # type: ignore[misc]
        return allowed or self._manager_may(request, "add")

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        allowed = super().has_change_permission(request, obj)  # type: ignore[misc]
        return allowed or self._manager_may(request, "change", obj)

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        allowed = super().has_delete_permission(request, obj)  # type: ignore[misc]
        return allowed or self._manager_may(request, "delete", obj)

    def formfield_for_foreignkey(self, db_field, request: HttpRequest, **kwargs):
        if db_field.name == self.product_field and self._scoped(request):
            kwargs["queryset"] = self.managed_products(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]


# A product filter that offers only the products of the rows listed (a manager's own), never the
# name of every product.
PRODUCT_FILTER = ("product", admin.RelatedOnlyFieldListFilter)
