"""Attached files: upload (multipart) and the owner's download (docs/chat.md#files, docs/security.md#files)."""

from __future__ import annotations

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from core.idempotency import idempotent

from .selectors import file_of_owner
from .services import file_upload
from .sniffing import ACCEPTED, FileRefused
from .storage import file_storage, object_name

ERROR = inline_serializer(
    "FileError",
    fields={
        "code": serializers.ChoiceField(
            choices=[
                "file_refused",
                "file_empty",
                "file_too_large",
                "file_type_refused",
                "file_type_mismatch",
                "file_truncated",
                "file_quota_exceeded",
                "invalid_request",
                "invalid_json",
                "unsupported_media_type",
                "invalid_idempotency_key",
                "idempotency_key_reused",
                "not_found",
            ]
        ),
        "message": serializers.CharField(help_text="Which file and why, in plain words."),
        "file": serializers.CharField(required=False, help_text="The (sanitised) name of the file refused."),
    },
)


class FileOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="Name it in `file_ids` when sending a chat message.")
    name = serializers.CharField()
    media_type = serializers.ChoiceField(choices=list(ACCEPTED), help_text="Decided from the bytes.")
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    url = serializers.CharField(help_text="The owner's download (an attachment).")
    created_at = serializers.DateTimeField()


def file_data(stored) -> dict:
    return {
        "id": stored.pk,
        "name": stored.name,
        "media_type": stored.media_type,
        "size": stored.size,
        "sha256": stored.sha256,
        "url": f"/api/files/{stored.pk}/",
        "created_at": stored.created_at,
    }


class FileUploadApi(APIView):
    throttle_scope = "file_upload"  # core/throttles.py
    parser_classes = [MultiPartParser]

    class InputSerializer(serializers.Serializer):
        file = serializers.FileField(help_text=f"One file: {', '.join(ACCEPTED)}; its type is read from its bytes.")

    @extend_schema(
        operation_id="file_upload",
        summary="Upload a file to attach to a chat message (its bytes are kept once, by their SHA-256)",
        request={"multipart/form-data": InputSerializer},
        responses={201: FileOutputSerializer, 400: ERROR, 409: ERROR, 413: ERROR, 415: ERROR},
    )
    @idempotent
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        body = b"".join(upload.chunks())
        if upload.size is not None and len(body) != upload.size:
            raise FileRefused("file_truncated", f"{upload.name} arrived incomplete. Upload it again.", name=upload.name)
        stored = file_upload(owner=request.user, name=upload.name, data=body, claimed_type=upload.content_type or "")
        return Response(FileOutputSerializer(file_data(stored)).data, status=status.HTTP_201_CREATED)


class FileDownloadApi(APIView):
    @extend_schema(
        operation_id="file_download",
        summary="Download one of your files (always as an attachment; another owner's file is a 404)",
        responses={(200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY), 404: ERROR},
    )
    def get(self, request, file_id: int):
        stored = file_of_owner(owner=request.user, file_id=file_id)
        handle = file_storage().open(object_name(stored.sha256), "rb")
        # Only the accepted types (never HTML or SVG) are ever stored; the headers make sure a browser never renders
        # or sniffs one as a page anyway: an attachment, no sniffing, a sandbox with nothing allowed.
        response = FileResponse(handle, as_attachment=True, filename=stored.name, content_type=stored.media_type)
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = "default-src 'none'; sandbox"
        response["Cache-Control"] = "private, max-age=3600"
        response["Cross-Origin-Resource-Policy"] = "same-origin"
        return response
