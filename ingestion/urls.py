from django.urls import re_path

from ingestion.acceptance import ENDPOINTS
from ingestion.views import ingestion_view

urlpatterns = [
    re_path(rf"^{name}/?$", ingestion_view(name), name=f"ingest-{name.replace('/', '-')}")
    for name in ENDPOINTS
]
