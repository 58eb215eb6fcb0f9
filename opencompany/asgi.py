import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opencompany.settings.base")
# Static files are served by the same process (ASGIStaticFilesHandler: from the app and project static folders), so
# `dev.py run` and a small deployment need no separate file server; a proxy may serve STATIC_ROOT in front of it.
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

django_asgi_app = ASGIStaticFilesHandler(get_asgi_application())

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from opencompany.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
