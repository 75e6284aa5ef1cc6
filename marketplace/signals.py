"""Keep django-celery-beat in step when a connection is deleted (admin, cascade from a product)."""

from django.db.models.signals import post_delete
from django.dispatch import receiver

from marketplace.models import MarketplaceConnection
from marketplace.services import connection_schedule_delete


@receiver(post_delete, sender=MarketplaceConnection, dispatch_uid="marketplace_schedule_delete")
def _connection_deleted(sender, instance: MarketplaceConnection, **kwargs) -> None:
    connection_schedule_delete(periodic_task_id=instance.periodic_task_id)
