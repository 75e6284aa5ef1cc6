"""A delivery's status may be `cancelled`: pending or retrying when its automation was switched
off (automations.services.automation_switch_off). Only the choices change: no SQL runs on either
database, and no row is touched."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('automations', '0003_trait_sync'),
    ]

    operations = [
        migrations.AlterField(
            model_name='delivery',
            name='status',
            field=models.CharField(choices=[('pending', 'Pending'), ('retrying', 'Retrying'), ('delivered', 'Delivered'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='pending', max_length=16),
        ),
    ]
