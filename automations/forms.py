"""The dashboard's automation form: what a manager types, checked by the service's rules."""

import json

from django import forms

from automations.models import Automation
from engagement.models import Segment


class AutomationForm(forms.Form):
    name = forms.CharField(max_length=200, required=False)
    trigger = forms.ChoiceField(choices=Automation.Trigger.choices)
    target = forms.ChoiceField(choices=Automation.Target.choices)
    threshold = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=100,
        help_text="Score changed: points up or down. Band entered: 75, 50, 25 or 0 (empty: any).",
    )
    segment = forms.ModelChoiceField(queryset=Segment.objects.none(), required=False)
    days = forms.IntegerField(required=False, min_value=1, max_value=3650, help_text="Inactive.")
    conditions = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='JSON, as segments: [{"field": "trait:mrr", "operator": "greater_than", '
        '"value": 100000}]',
    )
    match = forms.ChoiceField(choices=Automation.Match.choices)
    destination = forms.ChoiceField(choices=Automation.Destination.choices)
    url = forms.CharField(
        label="URL",
        max_length=2000,
        widget=forms.PasswordInput(render_value=False),
        help_text="The receiver, or a Slack incoming-webhook URL; stored encrypted.",
    )
    cooldown_hours = forms.FloatField(initial=24, min_value=0, max_value=24 * 365)

    def __init__(self, *args, workspace_id: int, editing: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["segment"].queryset = Segment.objects.filter(workspace_id=workspace_id)
        if editing:  # the stored URL is never shown back: empty keeps it
            self.fields["url"].required = False
            self.fields["url"].help_text = "Stored encrypted; leave empty to keep the current one."

    @classmethod
    def editing(cls, automation: Automation, data=None) -> "AutomationForm":
        initial = {
            "name": automation.name,
            "trigger": automation.trigger,
            "target": automation.target,
            "threshold": automation.threshold,
            "segment": automation.segment_id,
            "days": automation.days,
            "conditions": json.dumps(automation.conditions) if automation.conditions else "",
            "match": automation.match,
            "destination": automation.destination,
            "cooldown_hours": automation.cooldown_seconds / 3600,
        }
        return cls(data, workspace_id=automation.workspace_id, editing=True, initial=initial)

    def clean_conditions(self) -> list:
        text = self.cleaned_data.get("conditions") or ""
        if not text.strip():
            return []
        try:
            return json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"Not JSON: {exc}") from None


class ReplaySinceForm(forms.Form):
    since = forms.DateTimeField(
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"],
    )


class TraitSyncForm(forms.Form):
    host = forms.URLField(
        max_length=500,
        assume_scheme="https",
        help_text="e.g. https://api.segment.io, or a RudderStack data plane."
    )
    write_key = forms.CharField(
        max_length=500, widget=forms.PasswordInput(render_value=False), label="Write key"
    )
    interval_minutes = forms.IntegerField(initial=60, min_value=1, max_value=7 * 24 * 60)
    prefix = forms.CharField(initial="eds_", max_length=32)
