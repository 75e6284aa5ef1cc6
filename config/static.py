"""Static files in every documented way of starting the service, collectstatic or not.

WhiteNoise serves what `collectstatic` wrote to STATIC_ROOT (compressed variants included).
Started without it (uvicorn straight after an install, say), pages came unstyled and
nothing said why: here every file the static finders know (the apps' own, the admin's, the
plotly.js of dashboard/staticfiles.py) is served too, for each path STATIC_ROOT does not hold.
The finders are read once, at start-up, as STATIC_ROOT is; `collectstatic` stays the production
step (it adds the compressed variants and gzip/brotli answers).
"""

from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    def add_files_from_finders(self) -> None:
        collected = dict(self.files)
        super().add_files_from_finders()
        # A collected file wins over the app's own: it has its compressed variants.
        self.files.update(collected)
