from django.urls import path

from ingestion.tracker.views import TRACKER_VERSION, tracker_latest, tracker_pinned

urlpatterns = [
    path("tracker.js", tracker_latest, name="tracker"),
    path(f"tracker-{TRACKER_VERSION}.js", tracker_pinned, name="tracker-pinned"),
]
