"""Serves the chart library shipped inside the pinned `plotly` package as a static file.

plotly (PyPI) carries the matching plotly.js build in its package data; this finder exposes
that one file as `dashboard/vendor/plotly.min.js`, so pip is the only install step, the file
is collected and served like any other static file, and no page asks another host for it.
"""

import importlib.util
from pathlib import Path

from django.contrib.staticfiles.finders import BaseFinder
from django.core.exceptions import ImproperlyConfigured
from django.core.files.storage import FileSystemStorage

PREFIX = "dashboard/vendor"
FILES = ("plotly.min.js",)


class PlotlyFinder(BaseFinder):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Only the package's files are used, never its Python side: found, not imported.
        spec = importlib.util.find_spec("plotly")
        if spec is None or spec.origin is None:
            raise ImproperlyConfigured("The dashboard's charts need plotly (requirements.txt).")
        self.location = Path(spec.origin).parent / "package_data"
        self.storage = FileSystemStorage(location=self.location)
        # Django's own finders set `prefix` on their storages too; django-stubs leave it out.
        self.storage.prefix = PREFIX  # type: ignore[attr-defined]

    def check(self, **kwargs) -> list:
        return []

    def find(self, path: str, find_all: bool = False, **kwargs):
        for name in FILES:
            if path == f"{PREFIX}/{name}":
                found = str(self.location / name)
                return [found] if find_all else found
        return [] if find_all else None

    def list(self, ignore_patterns):
        for name in FILES:
            yield name, self.storage
