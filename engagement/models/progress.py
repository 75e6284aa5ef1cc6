"""How far accounts and users have come in a workspace: its features (groups of event names)
and its activation steps. Read by engagement/features.py and engagement/activation.py."""

from django.db import models

from engagement.models.products import Workspace


class Feature(models.Model):
    """A named group of event names. An event name belongs to at most one feature of a workspace
    (engagement.features.features_faults checks it wherever features are written)."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="features")
    name = models.CharField(max_length=200)
    events = models.JSONField(default=list)  # event names, in the order given
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="feature_name_unique")
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name


class ActivationStep(models.Model):
    """One step of a workspace's activation for users or for accounts: `event:<name>` (done once
    the subject has ever sent it) or `trait:<name>` (done once the trait is set)."""

    class Target(models.TextChoices):
        USERS = "users", "Users"
        ACCOUNTS = "accounts", "Accounts"

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="activation_steps"
    )
    target = models.CharField(max_length=16, choices=Target.choices)
    step = models.CharField(max_length=262)  # "event:" or "trait:" and a name of 1-255
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "target", "step"], name="activation_step_unique"
            )
        ]
        ordering = ["target", "position", "id"]

    def __str__(self) -> str:
        return self.step
