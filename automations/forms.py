"""The automation forms: what a manager types, parsed here and checked by the service's one
rule (automations.services.automation_faults), every fault at once."""

from __future__ import annotations

from typing import Any, cast

from django import forms

from automations import services
from automations.display import cooldown_hours
from automations.models import Automation
from engagement.document_field import DocumentField
from engagement.models import Segment, Workspace

# The service's fields a form shows under another name.
SHOWN_AS = {"cooldown_seconds": "cooldown_hours"}


class ConditionsField(DocumentField):
    """A list of conditions typed as JSON, read as every typed document is (deep nesting, NaN
    and numbers beyond a double are faults, never a crash); empty is none."""

    widget = forms.Textarea(attrs={"rows": 2})

    def to_python(self, value: object) -> Any:
        converted = super().to_python(value)
        return [] if converted is None else converted

    def prepare_value(self, value: object) -> str:
        return "" if value in (None, "", []) else super().prepare_value(value)


def faults_shown(
    form: forms.BaseForm, faults: dict[str, list[str]], shown_as: dict[str, str]
) -> None:
    """Add the service's faults to the form, each under the field that shows it (a field that
    could not be read has its own fault already); the rest go above the form."""
    for field, messages in faults.items():
        name = shown_as.get(field, field)
        if name in form.fields:
            if name not in form.errors:
                form.add_error(name, messages)
        else:
            form.add_error(None, [f"{field}: {message}" for message in messages])


class AutomationForm(forms.Form):
    name = forms.CharField(required=False)
    trigger = forms.ChoiceField(choices=Automation.Trigger.choices)
    target = forms.ChoiceField(choices=Automation.Target.choices)
    threshold = forms.IntegerField(
        required=False,
        help_text="Score changed: points up or down, 1 to 100. Band entered: 75, 50, 25 or 0 "
        "(empty: any).",
    )
    segment = forms.ModelChoiceField(queryset=Segment.objects.none(), required=False)
    days = forms.IntegerField(required=False, help_text="Inactive: 1 to 3,650.")
    conditions = ConditionsField(
        required=False,
        help_text='JSON, as segments, at most 50: [{"field": "trait:mrr", "operator": '
        '"greater_than", "value": 100000}]',
    )
    match = forms.ChoiceField(choices=Automation.Match.choices)
    destination = forms.ChoiceField(choices=Automation.Destination.choices)
    url = forms.CharField(
        label="URL",
        widget=forms.PasswordInput(render_value=False),
        help_text="The receiver, or a Slack incoming-webhook URL; stored encrypted.",
    )
    cooldown_hours = forms.FloatField(
        label="Cool-down (hours)",
        initial=24,
        help_text=f"A subject fires at most once per cool-down: 0 to "
        f"{services.COOLDOWN_MAX_DAYS * 24:,} hours (a year); 0.5 is 30 minutes.",
    )

    def __init__(
        self,
        *args,
        workspace: Workspace,
        automation: Automation | None = None,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.workspace = workspace
        self.automation = automation
        segment = cast(forms.ModelChoiceField, self.fields["segment"])
        segment.queryset = Segment.objects.filter(workspace=workspace)
        if automation is not None:  # the stored URL is never shown back: empty keeps it
            self.fields["url"].required = False
            self.fields["url"].help_text = "Stored encrypted; leave empty to keep the current one."

    @classmethod
    def editing(cls, automation: Automation, data=None) -> AutomationForm:
        initial = {
            "name": automation.name,
            "trigger": automation.trigger,
            "target": automation.target,
            "threshold": automation.threshold,
            "segment": automation.segment_id,
            "days": automation.days,
            "conditions": automation.conditions,
            "match": automation.match,
            "destination": automation.destination,
            "cooldown_hours": cooldown_hours(automation.cooldown_seconds),
        }
        return cls(data, workspace=automation.workspace, automation=automation, initial=initial)

    def settings(self) -> dict[str, Any]:
        """The service's settings from what the form read (a field it could not read is left
        out; an edit's empty URL keeps the stored one)."""
        values = {
            name: value
            for name, value in self.cleaned_data.items()
            if name in self.fields and name != "cooldown_hours"
        }
        if "cooldown_hours" in self.cleaned_data:
            values["cooldown_seconds"] = services.cooldown_seconds_of(
                self.cleaned_data["cooldown_hours"]
            )
        if self.automation is not None and not values.get("url"):
            values.pop("url", None)
        return values

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        values = self.settings()
        if self.automation is None:
            values.setdefault("trigger", "")
            values.setdefault("url", "")
            candidate = services.automation_new(workspace=self.workspace, **values)
        else:
            candidate = services.automation_changed(self.automation, **values)
        faults_shown(self, services.automation_faults(candidate), SHOWN_AS)
        return cleaned


class ReplaySinceForm(forms.Form):
    since = forms.DateTimeField(
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"],
    )


class TraitSyncForm(forms.Form):
    host = forms.URLField(
        max_length=500,
        assume_scheme="https",
        help_text="e.g. https://api.segment.io, or a RudderStack data plane.",
    )
    write_key = forms.CharField(
        max_length=500, widget=forms.PasswordInput(render_value=False), label="Write key"
    )
    interval_minutes = forms.IntegerField(initial=60, min_value=1, max_value=7 * 24 * 60)
    # The form's metaclass pops declared fields off the class, so BaseForm.prefix (the HTML
    # names' prefix) stays None; the stubs cannot see that.
    prefix = forms.CharField(initial="eds_", max_length=32)  # type: ignore[assignment]
