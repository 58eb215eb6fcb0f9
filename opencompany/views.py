from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token

from workflows.selectors import workflows_for_owner


@login_required
def home(request):
    workflows = workflows_for_owner(user=request.user)
    return render(request, "home.html", {"workflows": workflows})


@login_required
@require_http_methods(["GET", "POST"])
def api_token(request):
    """Shows whether a token exists; POST makes a new one and shows it once."""
    new_token = None
    if request.method == "POST":
        Token.objects.filter(user=request.user).delete()
        new_token = Token.objects.create(user=request.user).key
    has_token = Token.objects.filter(user=request.user).exists()
    return render(request, "api_token.html", {"new_token": new_token, "has_token": has_token})
