"""The site's root: where a person who opens the service's address finds its pages."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def landing(request: HttpRequest) -> HttpResponse:
    return render(request, "config/landing.html")
