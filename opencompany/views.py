from django.contrib.auth.decorators import login_required

from workflows.views import workflows_home


@login_required
def home(request):
    # The home page is the owner's workflows list.
    return workflows_home(request)
