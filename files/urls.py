from django.urls import path

from . import apis

urlpatterns = [
    path("files/", apis.FileUploadApi.as_view(), name="file-upload"),
    path("files/<int:file_id>/", apis.FileDownloadApi.as_view(), name="file-download"),
]
