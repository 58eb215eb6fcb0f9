import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from workflows.services import workflow_demo_ensure

DEMO_USERNAME = "demo"


class Command(BaseCommand):
    help = "Create the demo owner and demo workflow when they are missing (idempotent)."

    def handle(self, *args, **options):

        User = get_user_model()
        with transaction.atomic():
            user = User.objects.filter(username=DEMO_USERNAME).first()
            password = None
            if user is None:
                password = secrets.token_urlsafe(12)
                user = User.objects.create_user(username=DEMO_USERNAME, password=password)
            workflow, created = workflow_demo_ensure(owner=user)
        if password:
            self.stdout.write(f"Demo owner created. Login: {DEMO_USERNAME}  Password: {password}")
            self.stdout.write("(This password is printed once. Change it with: python manage.py changepassword demo)")
        else:
            self.stdout.write(
                f"Demo owner '{DEMO_USERNAME}' exists (password printed at first run; "
                "reset it with: python manage.py changepassword demo)"
            )
        if created:
            self.stdout.write(f"Demo workflow created: {workflow.name} (#{workflow.pk})")
        if not User.objects.filter(is_staff=True, is_active=True).exists():
            # The demo owner is not staff on purpose (it is an ordinary owner); /admin/ needs its own login.
            self.stdout.write(
                "No staff login yet. For /admin/, create one with: .venv/bin/python manage.py createsuperuser"
            )
