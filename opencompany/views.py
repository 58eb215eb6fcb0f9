from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from workflows.selectors import workflows_for_owner


@login_required
def home(request):
    workflows = workflows_for_owner(user=request.user)
    return render(request, "home.html", {"workflows": workflows})
