from django.db import migrations


class Migration(migrations.Migration):
    initial = True
    dependencies = [("engagement", "0015_score_history_backfill")]
    operations = []
