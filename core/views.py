from django.contrib.auth import views as auth_views

from core.throttles import LoginFailures


class LoginView(auth_views.LoginView):
    """Failed login attempts are limited per client IP and per account (core/throttles.py, LoginFailures)."""

    template_name = "registration/login.html"

    def post(self, request, *args, **kwargs):
        self.failures = LoginFailures(request, request.POST.get("username", ""))
        if not self.failures.begin():
            return self.failures.refusal()
        return super().post(request, *args, **kwargs)

    def form_valid(self, form):
        self.failures.succeeded()  # only failures count
        return super().form_valid(form)
