from django import forms
from django.contrib import admin

from .models import AllowedProviderHost, OwnerProviderKey, OwnerSecret
from .secrets import owner_secret_set, secret_problem


@admin.register(AllowedProviderHost)
class AllowedProviderHostAdmin(admin.ModelAdmin):
    list_display = ("host", "note", "created_at")
    search_fields = ("host",)


@admin.register(OwnerProviderKey)
class OwnerProviderKeyAdmin(admin.ModelAdmin):
    """Metadata only: staff see which owners brought keys, never a key (not even encrypted)."""

    list_display = ("owner", "provider", "key_suffix", "base_url", "last_test_ok", "updated_at")
    list_filter = ("provider",)
    fields = ("owner", "provider", "key_suffix", "base_url", "last_tested_at", "last_test_ok", "last_test_message")
    readonly_fields = fields

    def has_add_permission(self, request):
        return False  # keys are written by their owner only

    def has_change_permission(self, request, obj=None):
        return False


class OwnerSecretForm(forms.ModelForm):
    """A secret's value can be set here (for an owner who asks staff to rotate one) and is never shown: the field
    is a password input that renders empty, and the stored token is not on the form."""

    value = forms.CharField(
        label="New value",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only: leave empty to keep the stored value. The value is never shown, here or anywhere.",
    )

    class Meta:
        model = OwnerSecret
        fields = ("owner", "name")

    def clean(self):
        data = super().clean()
        value = data.get("value") or ""
        if self.instance.pk is None and not value:
            self.add_error("value", "A new secret needs a value.")
        elif value and (problem := secret_problem(data.get("name") or self.instance.name, value)):
            self.add_error("name" if problem[0] == "invalid_secret_name" else "value", problem[1])
        return data


@admin.register(OwnerSecret)
class OwnerSecretAdmin(admin.ModelAdmin):
    """Owners' named secrets (MCP servers' headers): names, owners and dates; a value is write-only."""

    form = OwnerSecretForm
    list_display = ("name", "owner", "created_at", "updated_at")
    search_fields = ("owner__username", "owner__email", "name")
    list_select_related = ("owner",)
    raw_id_fields = ("owner",)
    readonly_fields = ("created_at", "updated_at")

    def get_readonly_fields(self, request, obj=None):
        # Owner and name are what nodes reference: fixed once stored (a rename would break the nodes naming it).
        return ("owner", "name", *self.readonly_fields) if obj is not None else self.readonly_fields

    def get_fields(self, request, obj=None):
        return ("owner", "name", "value", "created_at", "updated_at") if obj is not None else ("owner", "name", "value")

    def save_model(self, request, obj, form, change):
        value = form.cleaned_data.get("value")
        if value:
            stored = owner_secret_set(owner=obj.owner, name=obj.name, value=value)
            obj.pk, obj.created_at, obj.updated_at = stored.pk, stored.created_at, stored.updated_at
