from django.urls import path

from automations import views

app_name = "automations"

urlpatterns = [
    path("w/<int:workspace_id>/automations/", views.AutomationListView.as_view(), name="list"),
    path(
        "w/<int:workspace_id>/automations/<int:automation_id>/",
        views.AutomationDetailView.as_view(),
        name="detail",
    ),
    path(
        "w/<int:workspace_id>/automations/<int:automation_id>/deliveries/<str:delivery_id>/",
        views.DeliveryView.as_view(),
        name="delivery",
    ),
]
