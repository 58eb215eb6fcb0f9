import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opencompany.settings.base")
# Before settings load: web processes get short database timeouts (settings: WEB_PROCESS). Removed once read, so
# a process started from this one (a test's worker) is not taken for a web process.
_web_flag_added = "OPENCOMPANY_WEB_PROCESS" not in os.environ
os.environ.setdefault("OPENCOMPANY_WEB_PROCESS", "1")
application = get_wsgi_application()
if _web_flag_added:
    os.environ.pop("OPENCOMPANY_WEB_PROCESS", None)
