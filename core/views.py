from django.contrib.auth import views as auth_views

from core.throttles import ip_throttle


class LoginView(auth_views.LoginView):
    """Login attempts are limited per client IP (settings.THROTTLE_RATES["login"])."""

    template_name = "registration/login.html"

    def post(self, request, *args, **kwargs):
        if refused := ip_throttle(request, "login"):
            return refused
        return super().post(request, *args, **kwargs)
