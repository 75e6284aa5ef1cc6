from django.contrib.auth import views as auth_views
from django.urls import path

from config.login import LoginForm
from dashboard import config_views, export, views

app_name = "dashboard"

urlpatterns = [
    path("", views.HomeView.as_view(), name="home"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="dashboard/login.html",
            authentication_form=LoginForm,
            redirect_authenticated_user=True,
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("w/<int:workspace_id>/", views.OverviewView.as_view(), name="overview"),
    path("w/<int:workspace_id>/accounts/", views.AccountListView.as_view(), name="accounts"),
    path(
        "w/<int:workspace_id>/accounts.csv", export.AccountExportView.as_view(), name="accounts_csv"
    ),
    path(
        "w/<int:workspace_id>/accounts/<int:account_id>/",
        views.AccountView.as_view(),
        name="account",
    ),
    path("w/<int:workspace_id>/users/", views.UserListView.as_view(), name="users"),
    path("w/<int:workspace_id>/users/<int:user_id>/", views.UserView.as_view(), name="user"),
    path("w/<int:workspace_id>/segments/", views.SegmentListView.as_view(), name="segments"),
    path(
        "w/<int:workspace_id>/segments/<int:segment_id>/",
        views.SegmentView.as_view(),
        name="segment",
    ),
    path("w/<int:workspace_id>/health/", views.HealthView.as_view(), name="health"),
    path("w/<int:workspace_id>/config/", config_views.WorkspaceConfigView.as_view(), name="config"),
    path(
        "w/<int:workspace_id>/config.json",
        config_views.WorkspaceConfigDownloadView.as_view(),
        name="config_json",
    ),
]
