import pytest

from engagement.models import Event, User

pytestmark = pytest.mark.both_databases


def test_v2_track_is_accepted_and_applied(
    acme, post_json, drain, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        response = post_json(
            "/v2/track", {"userId": "usr_ann", "event": "Report_Created"}, auth=acme.basic
        )
    assert response.status_code == 202
    assert response.content == b""
    assert drain() == 1
    ann = User.objects.get(product=acme.product, tracking_id="usr_ann")
    assert ann.identified is False
    assert Event.objects.filter(user=ann, name="Report_Created").count() == 1
