from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required

from opencompany.throttles import ip_throttle
from workflows.views import workflows_home


class LoginView(auth_views.LoginView):
    """Login attempts are limited per client IP (settings.THROTTLE_RATES["login"])."""

    template_name = "registration/login.html"

    def post(self, request, *args, **kwargs):
        if refused := ip_throttle(request, "login"):
            return refused
        return super().post(request, *args, **kwargs)


@login_required
def home(request):
    # The home page is the owner's workflows list.
    return workflows_home(request)
