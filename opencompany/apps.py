from django.apps import AppConfig


class OpenCompanyConfig(AppConfig):
    name = "opencompany"
    verbose_name = "OpenCompany"

    def ready(self):
        from opencompany.socket_access import connect_signals

        connect_signals()
