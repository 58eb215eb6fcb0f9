from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.models import ApiToken
from accounts.tokens import api_token_create, api_token_revoke


class Command(BaseCommand):
    help = (
        "Make a new API token for a user and print it (the only time it is shown). "
        "A live token of the same name is revoked first, so re-running the command rotates it."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="command line", help="the token's name (default: %(default)s)")
        parser.add_argument(
            "--days", type=int, default=None, help=f"days until it expires (default: {settings.API_TOKEN_DEFAULT_DAYS})"
        )

    def handle(self, *args, username: str, name: str, days: int | None, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        for token_id in ApiToken.objects.filter(user=user, name=name, revoked_at__isnull=True).values_list(
            "pk", flat=True
        ):
            api_token_revoke(user=user, token_id=token_id)
        try:
            issued = api_token_create(user=user, name=name, expires_in_days=days)
        except Exception as error:  # a ServiceError: too many tokens, a bad name or lifetime
            raise CommandError(str(error)) from error
        self.stdout.write(issued.raw_key)
