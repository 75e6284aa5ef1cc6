"""What the admin calls rows and models, in English a person reads."""

from engagement.models import EventWeight


def test_a_weight_reads_as_its_event_and_weight(acme):
    weight = EventWeight.objects.create(
        workspace=acme.workspace, event_name="Report_Created", weight=5
    )

    assert str(weight) == "Report_Created: 5"
