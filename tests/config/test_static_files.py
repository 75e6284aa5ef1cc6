"""Styled without collectstatic: the service started as the README's production section does
(uvicorn with the ASGI door, the one web command), with an empty STATIC_ROOT, serves the
stylesheet and scripts its pages link to."""

import re
import urllib.request

import pytest
from django.conf import settings

from tests.config.test_production_e2e import free_port, http, production_env, spawn, wait_for


def server_command(port: int) -> list[str]:
    return ["uvicorn", "config.asgi:application", "--host", "127.0.0.1", "--port", str(port)]


@pytest.mark.e2e
def test_pages_are_styled_without_collectstatic(django_db_setup, tmp_path):
    env = production_env(settings.CELERY_BROKER_URL, tmp_path)
    static_root = tmp_path / "static"
    assert not static_root.exists()  # collectstatic never ran
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = spawn(server_command(port), env)
    try:
        wait_for(lambda: http("GET", f"{base}/login/")[0] == 200)
        status, body = http("GET", f"{base}/login/")
        linked = re.findall(r'(?:href|src)="(/static/[^"]+)"', body.decode())
        assert "/static/dashboard/dashboard.css" in linked
        status, admin_page = http("GET", f"{base}/admin/login/")
        linked += re.findall(r'(?:href|src)="(/static/[^"]+)"', admin_page.decode())
        linked.append("/static/dashboard/vendor/plotly.min.js")  # the charts' pages link it
        assert "/static/dashboard/favicon.svg" in linked
        # Browsers ask for /favicon.ico on their own: it leads to the icon.
        with urllib.request.urlopen(f"{base}/favicon.ico", timeout=10) as icon:  # noqa: S310
            assert icon.headers["Content-Type"].startswith("image/svg+xml")
        for path in linked:
            with urllib.request.urlopen(f"{base}{path}", timeout=10) as answer:  # noqa: S310
                assert answer.status == 200, path
                kind_of = answer.headers["Content-Type"]
                expected = ("text/css", "text/javascript", "image/svg+xml")  # the icon
                assert kind_of.startswith(expected), (path, kind_of)
                assert len(answer.read()) > 100, path
    finally:
        server.terminate()
        server.wait(timeout=20)


def test_a_collected_file_wins_over_the_apps_own(settings, tmp_path):
    from config.static import StaticFilesMiddleware

    collected = tmp_path / "dashboard" / "dashboard.css"
    collected.parent.mkdir()
    collected.write_text("body { color: red; }")
    settings.STATIC_ROOT = str(tmp_path)
    served = StaticFilesMiddleware(lambda request: None).files

    assert served["/static/dashboard/dashboard.css"].alternatives[0][1] == str(collected)
    # What collectstatic did not write still comes from the finders.
    assert "/static/admin/css/base.css" in served
    assert "/static/dashboard/vendor/plotly.min.js" in served
