import itertools

import pytest

_user_numbers = itertools.count(1)


@pytest.fixture
def make_user(db, django_user_model):
    def make(username: str | None = None, *, password: str = "pw-for-tests-1", **fields):
        name = username or f"owner{next(_user_numbers)}"
        return django_user_model.objects.create_user(username=name, password=password, **fields)

    return make


@pytest.fixture
def owner(make_user):
    return make_user("owner")


@pytest.fixture
def other_owner(make_user):
    return make_user("intruder")


@pytest.fixture
def api_client():
    from rest_framework.test import APIClient

    return APIClient()


@pytest.fixture
def owner_client(api_client, owner):
    api_client.force_authenticate(owner)
    return api_client


@pytest.fixture
def other_client(other_owner):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(other_owner)
    return client
