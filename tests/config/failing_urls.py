"""The service's URLs plus a page and an API path that fail, for the 500 answers."""

from django.urls import path

from config.urls import handler400, handler403, handler404, handler500  # noqa: F401
from config.urls import urlpatterns as service_urls


def fail(request):
    raise RuntimeError("a bug")


urlpatterns = [path("failing/", fail), path("v2/failing", fail), *service_urls]
