import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opencompany.settings.base")
# Before settings load: web processes get short database timeouts (settings: WEB_PROCESS). Removed once read, so
# a process started from this one (a test's worker) is not taken for a web process.
_web_flag_added = "OPENCOMPANY_WEB_PROCESS" not in os.environ
os.environ.setdefault("OPENCOMPANY_WEB_PROCESS", "1")
# Static files are served by the same process (collected and content-hashed when STATIC_HASHED, else from the source
# folders, with the security headers of pages: core/static_files.py), so
# `dev.py run` and a small deployment need no separate file server; a proxy may serve STATIC_ROOT in front of it.
from core.body_limit import install as install_body_limit  # noqa: E402
from core.static_files import StaticFiles  # noqa: E402

django_asgi_app = StaticFiles(get_asgi_application())
# Daphne refuses a body over REQUEST_MAX_BYTES before reading it (it would otherwise read and queue it whole).
install_body_limit()
if _web_flag_added:
    os.environ.pop("OPENCOMPANY_WEB_PROCESS", None)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from core.origins import ExactOriginValidator  # noqa: E402
from opencompany.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": ExactOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
