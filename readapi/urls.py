from django.urls import path

from readapi import erasure_views, history_views, views

urlpatterns = [
    path("v2/workspaces", views.WorkspaceListView.as_view(), name="read-workspaces"),
    path(
        "v2/workspaces/<int:workspace_id>",
        views.WorkspaceDetailView.as_view(),
        name="read-workspace",
    ),
    path("v2/accounts", views.AccountListView.as_view(), name="read-accounts"),
    # GET reads the account (views.AccountDetailView), DELETE erases it.
    path("v2/accounts/<int:account_id>", erasure_views.AccountView.as_view(), name="read-account"),
    path(
        "v2/accounts/<int:account_id>/history",
        history_views.AccountHistoryView.as_view(),
        name="read-account-history",
    ),
    path("v2/users", views.UserListView.as_view(), name="read-users"),
    path("v2/users/<int:user_id>", erasure_views.UserView.as_view(), name="read-user"),
    path(
        "v2/users/<int:user_id>/history",
        history_views.UserHistoryView.as_view(),
        name="read-user-history",
    ),
    path("v2/segments", views.SegmentListView.as_view(), name="read-segments"),
    path("v2/segments/<int:segment_id>", views.SegmentDetailView.as_view(), name="read-segment"),
    path(
        "v2/segments/<int:segment_id>/members",
        views.SegmentMemberListView.as_view(),
        name="read-segment-members",
    ),
    path(
        "v2/deletions/<int:deletion_id>",
        erasure_views.DeletionDetailView.as_view(),
        name="read-deletion",
    ),
    path("v1/accounts", views.LegacyAccountLookupView.as_view(), name="read-v1-accounts"),
]
