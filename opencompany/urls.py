from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path

from accounts import views as account_views
from core import health, metrics, views
from core.schema import docs_view, schema_view
from workflows.views import workflows_home

api_urlpatterns = [
    path("", include("workflows.urls")),
    path("", include("conversations.urls")),
    path("", include("memory.urls")),
    path("", include("mcp_nodes.urls")),
    path("", include("chat.urls")),
    path("", include("agents.urls")),
    path("", include("accounts.urls")),
    path("", include("triggers.urls")),
    path("", include("files.urls")),
    path("schema/", schema_view(), name="api-schema"),
    path("docs/", docs_view(url_name="api-schema"), name="api-docs"),
    path("", include("provider_keys.urls")),
]

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    # Browsers ask for /favicon.ico on pages that name no icon (admin, API docs): answer with ours.
    path("favicon.ico", lambda request: HttpResponseRedirect(static("favicon.svg"))),
    path("healthz/live", health.live, name="healthz-live"),
    path("healthz/ready", health.ready, name="healthz-ready"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("", include("triggers.hook_urls")),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", workflows_home, name="home"),  # the home page is the owner's workflows list
    path("settings/token/", account_views.api_tokens_page, name="api-token"),
    path("settings/usage/", account_views.usage_page, name="usage-page"),
    path("settings/password/", account_views.password_change_page, name="password-change"),
    path("admin/", admin.site.urls),
    path("api/", include(api_urlpatterns)),
    path("", include("workflows.page_urls")),
    path("", include("conversations.page_urls")),
    path("", include("memory.page_urls")),
    path("", include("chat.page_urls")),
    path("", include("provider_keys.page_urls")),
    path("", include("agents.page_urls")),
]
