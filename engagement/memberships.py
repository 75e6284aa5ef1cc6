"""Who may see and manage which product: the per-product membership granted in the admin.

Superusers see and manage every product; anyone else sees the products they are a member of
(viewer or manager) and manages those where they are a manager. Inactive users see nothing.
"""

from django.db.models import QuerySet

from engagement.models import Product, ProductMembership, Workspace
from engagement.workspace_cache import with_scores_refreshed_at


def products_visible_to(user) -> QuerySet[Product]:
    """The products this user may read, by name."""
    if not (user.is_authenticated and user.is_active):
        return Product.objects.none()
    products = Product.objects.order_by("name", "id")
    if user.is_superuser:
        return products
    return products.filter(memberships__user=user)


def can_manage_product(user, product: Product | int) -> bool:
    """True for a superuser, or a member of this product with the manager role."""
    if not (user.is_authenticated and user.is_active):
        return False
    if user.is_superuser:
        return True
    product_id = product if isinstance(product, int) else product.pk
    return ProductMembership.objects.filter(
        user=user, product_id=product_id, role=ProductMembership.Role.MANAGER
    ).exists()


def products_managed_by(user) -> QuerySet[Product]:
    """The products this user may configure (their marketplace connection, ...)."""
    if not (user.is_authenticated and user.is_active):
        return Product.objects.none()
    products = Product.objects.order_by("name", "id")
    if user.is_superuser:
        return products
    return products.filter(memberships__user=user, memberships__role=ProductMembership.Role.MANAGER)


def product_role(user, product_id: int) -> str | None:
    """The role of this user in this product (None: no access); superusers manage every product."""
    if not (user.is_authenticated and user.is_active):
        return None
    if user.is_superuser:
        exists = Product.objects.filter(id=product_id).exists()
        return ProductMembership.Role.MANAGER if exists else None
    return (
        ProductMembership.objects.filter(user=user, product_id=product_id)
        .values_list("role", flat=True)
        .first()
    )


def workspaces_visible_to(user) -> QuerySet[Workspace]:
    """The workspaces of the products this user may read, by product name then creation."""
    return (
        Workspace.objects.filter(product__in=products_visible_to(user).values("id"))
        .select_related("product")
        .order_by("product__name", "product_id", "id")
    )


def workspace_visible_to(user, workspace_id: int) -> Workspace | None:
    """The workspace with this id if this user may read its product, else None; with its last
    score refresh, which keys its cached figures (engagement/workspace_cache.py)."""
    return with_scores_refreshed_at(workspaces_visible_to(user).filter(id=workspace_id)).first()
