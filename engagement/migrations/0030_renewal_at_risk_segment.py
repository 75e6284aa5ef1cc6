"""Every existing workspace gets the built-in segment "Renewal at risk" (new workspaces get it when
created, engagement/builtin_segments.py). Inserts only, one row per workspace: no table is
rewritten or locked beyond the new rows, so it runs on a live database. A workspace that already
has a segment of that name (its own, or the built-in one migration 0017 gave a workspace created
on a fresh database) keeps it and gets no second one. Members come with the workspace's next
score refresh (members_refreshed_at is empty, so that refresh compares the segment whole).

Reversed, it deletes the built-in segments of that name, with their members and change log.
"""

from django.db import migrations


def renewal_at_risk_for_existing_workspaces(apps, schema_editor):
    from engagement.builtin_segments import RENEWAL_AT_RISK, RENEWAL_AT_RISK_CONDITIONS

    Workspace = apps.get_model("engagement", "Workspace")
    Segment = apps.get_model("engagement", "Segment")
    having = Segment.objects.filter(name=RENEWAL_AT_RISK).values("workspace_id")
    missing = Workspace.objects.exclude(id__in=having).order_by("id")
    Segment.objects.bulk_create(
        (
            Segment(
                workspace_id=workspace_id,
                name=RENEWAL_AT_RISK,
                target="accounts",
                match="all",
                conditions=RENEWAL_AT_RISK_CONDITIONS,
                builtin=True,
            )
            for workspace_id in missing.values_list("id", flat=True)
        ),
        batch_size=1000,
    )


def renewal_at_risk_remove(apps, schema_editor):
    from engagement.builtin_segments import RENEWAL_AT_RISK

    Segment = apps.get_model("engagement", "Segment")
    # Through the ORM: members and changes have no database-level foreign keys to cascade.
    Segment.objects.filter(builtin=True, name=RENEWAL_AT_RISK).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("engagement", "0029_name_keys"),
    ]

    operations = [
        migrations.RunPython(renewal_at_risk_for_existing_workspaces, renewal_at_risk_remove),
    ]
