from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from config.admin_lookups import view_on_site
from config.health import healthz
from config.login import AdminLoginForm
from config.metrics import metrics_view

# A too-long username is a form error, not a 500 (config/login.py).
admin.site.login_form = AdminLoginForm
admin.site.site_header = "Engagement Data Service"
admin.site.site_title = "Engagement admin"
# The app menu stays on the admin's home page; without the sidebar a list has the window's width
# (at 1,280 px the sidebar and the filters left a list about 600 px).
admin.site.enable_nav_sidebar = False

urlpatterns = [
    # Before the admin's own: its "View on site" link, with an id that cannot be one a 404.
    path(
        "admin/r/<path:content_type_id>/<path:object_id>/",
        admin.site.admin_view(view_on_site),
    ),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    # Browsers ask for /favicon.ico whatever the page links: the service's icon, not a 404.
    path(
        "favicon.ico",
        RedirectView.as_view(url=static("dashboard/favicon.svg"), permanent=True),
        name="favicon",
    ),
    path("metrics", metrics_view, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    # The browser tracker (/tracker.js); ingestion's POST paths are the door's (ingestion/asgi.py).
    path("", include("ingestion.urls")),
    path("", include("readapi.urls")),
    # The site's root is the dashboard (the admin's "View site" leads here).
    path("", include("dashboard.urls")),
    # The automation pages, in the dashboard's layout.
    path("", include("automations.urls")),
]

handler400 = "config.errors.bad_request"
handler403 = "config.errors.permission_denied"
handler404 = "config.errors.not_found"
handler500 = "config.errors.server_error"
