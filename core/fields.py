"""Serializer fields that accept exactly the JSON type the published schema names.

DRF's CharField takes `0` and IntegerField takes `"0"`; the schema says string and integer, so a client reading the
schema and a server accepting more disagree (schemathesis reports it as a schema-violating request accepted). A body
is JSON, so there is no form-encoding reason to coerce.
"""

from django.core.validators import RegexValidator
from rest_framework import serializers

# DRF refuses NUL characters in every CharField; this publishes that rule as the schema's `pattern`.
NO_NUL = RegexValidator(r"^[^\x00]*$", "Null characters are not allowed.")


class StrictCharField(serializers.CharField):
    default_error_messages = {"invalid": "Not a string."}

    def __init__(self, **kwargs):
        # Trimming would make "  " blank although the schema's minLength accepts it; services strip what they keep.
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        self.validators.append(NO_NUL)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    default_error_messages = {"invalid": "Not an integer."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    default_error_messages = {"invalid": "Not a number."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)
