from django.urls import path, register_converter

from automations import views
from automations.ids import DeliveryIdConverter

register_converter(DeliveryIdConverter, "delivery")

app_name = "automations"

urlpatterns = [
    path("w/<int:workspace_id>/automations/", views.AutomationListView.as_view(), name="list"),
    path(
        "w/<int:workspace_id>/automations/<int:automation_id>/",
        views.AutomationDetailView.as_view(),
        name="detail",
    ),
    path(
        "w/<int:workspace_id>/automations/<int:automation_id>/deliveries/<delivery:delivery_id>/",
        views.DeliveryView.as_view(),
        name="delivery",
    ),
]
