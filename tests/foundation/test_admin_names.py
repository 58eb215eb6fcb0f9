"""The admin names every model in plain English: no "outboxs", "settingss" or lower-case "api"."""

import re

import pytest
from django.contrib import admin
from django.test import Client

pytestmark = pytest.mark.django_db

# A plural made by appending "s" to a word that needs "es" (or is already plural).
_BAD_PLURAL = re.compile(r"(s|x|z|ch|sh)s$")


def test_every_registered_model_has_a_proper_plural():
    wrong = [
        f"{model._meta.label}: {model._meta.verbose_name_plural}"
        for model in admin.site._registry
        if _BAD_PLURAL.search(str(model._meta.verbose_name_plural))
        or re.search(r"\bapi\b", str(model._meta.verbose_name_plural))
    ]
    assert wrong == []


def test_the_admin_index_reads_archive_outbox_entries_and_api_tokens(make_user):
    client = Client()
    client.force_login(make_user("names-staff", is_staff=True, is_superuser=True))
    page = client.get("/admin/").content.decode()
    assert "Archive outbox entries" in page and "API tokens" in page
    assert "outboxs" not in page.lower() and "Api tokens" not in page
