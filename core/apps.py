from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    # The label the plumbing had when it lived in the `opencompany` package: its tables (idempotency receipts, the
    # vector extension's migration) and the rows in django_migrations keep their names on databases already deployed.
    label = "opencompany"
    verbose_name = "OpenCompany"

    def ready(self):
        from core.socket_access import connect_signals

        connect_signals()
