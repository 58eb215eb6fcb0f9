"""Each test's file storage is a folder of its own (the FILE_STORAGE alias on local disk)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def file_storage_dir(settings, tmp_path):
    folder = tmp_path / "files"
    settings.STORAGES = {
        **settings.STORAGES,
        settings.FILE_STORAGE: {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(folder)},
        },
    }
    return folder
