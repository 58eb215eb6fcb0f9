"""Settings for every environment, read from the environment with strict helpers.

With DATABASE_URL / REDIS_URL unset the embedded PostgreSQL and Redis are started (or
found running) under OPENCOMPANY_DATA_DIR; with them set, those servers are used and
nothing is started. See docs/deploy.md for production.
"""

import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url

from opencompany import embedded
from opencompany.env import env_bool, env_float, env_int, env_list, env_secret, env_str

BASE_DIR = Path(__file__).resolve().parent.parent.parent

DEBUG = env_bool("DEBUG", True)

DATA_DIR = embedded.data_dir()


def _dev_secret_key() -> str:
    # A development key that survives restarts without being committed anywhere.
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = env_secret("SECRET_KEY", dev_default=_dev_secret_key() if DEBUG else None, allow_default=DEBUG)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "channels",
    "opencompany",
    "workflows",
    "conversations",
    "memory",
    "chat",
    "agents",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "opencompany.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]
WSGI_APPLICATION = "opencompany.wsgi.application"
ASGI_APPLICATION = "opencompany.asgi.application"

# --- Database and Redis -----------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL") or embedded.ensure_postgres()
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60, minimum=0))}
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
REDIS_URL = env_str("REDIS_URL") or embedded.ensure_redis()
USING_EMBEDDED_SERVICES = not env_str("DATABASE_URL") or not env_str("REDIS_URL")

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "capacity": 1000, "expiry": 30},
    }
}

CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}

# --- Celery -----------------------------------------------------------------------------
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND")  # results are not required
CELERY_TASK_IGNORE_RESULT = CELERY_RESULT_BACKEND is None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_DEFAULT_QUEUE = "housekeeping"
CELERY_QUEUE_AGENT = "agent"
CELERY_QUEUE_HOUSEKEEPING = "housekeeping"
CELERY_TASK_ROUTES = {"agent.*": {"queue": CELERY_QUEUE_AGENT}}
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=60)}
CELERY_TASK_ALWAYS_EAGER = False
CELERY_WORKER_HEARTBEAT_KEY = "opencompany:worker-heartbeat"
CELERY_WORKER_HEARTBEAT_TTL = env_int("CELERY_WORKER_HEARTBEAT_TTL", 30, minimum=5)
CELERY_BEAT_SCHEDULE = {
    "worker-heartbeat": {"task": "opencompany.worker_heartbeat", "schedule": timedelta(seconds=10)},
}

# --- Auth, API --------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "opencompany.errors.api_exception_handler",
    "DEFAULT_PAGINATION_CLASS": None,
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "OpenCompany API",
    "DESCRIPTION": "Workflows of AI agents with exact Context and a durable memory tool.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
}

# --- Limits -----------------------------------------------------------------------------
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 2 * 1024 * 1024, minimum=1024)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "WARNING"}, "httpx2": {"level": "WARNING"}},
}

# --- Production hardening (DEBUG off) ---------------------------------------------------
if not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
    SECURE_CONTENT_TYPE_NOSNIFF = True

# === App settings: each app adds its block below ========================================
_ = env_float  # kept available for app blocks

# --- providers (ChatUnifier, adapters, offline provider) ---------------------------------
# Keys and base URLs are read again from the environment at call time (providers/config.py), so a key rotated in
# the environment or a test pointing an SDK at a local fake server takes effect without a restart.
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
ANTHROPIC_API_KEY = env_str("ANTHROPIC_API_KEY")
GEMINI_API_KEY = env_str("GEMINI_API_KEY")
OPENAI_COMPATIBLE_API_KEY = env_str("OPENAI_COMPATIBLE_API_KEY")
OPENAI_COMPATIBLE_BASE_URL = env_str("OPENAI_COMPATIBLE_BASE_URL")
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL")
ANTHROPIC_BASE_URL = env_str("ANTHROPIC_BASE_URL")
GEMINI_BASE_URL = env_str("GEMINI_BASE_URL")
PROVIDER_CONNECT_TIMEOUT_S = env_float("PROVIDER_CONNECT_TIMEOUT_S", 10.0)
PROVIDER_READ_TIMEOUT_S = env_float("PROVIDER_READ_TIMEOUT_S", 300.0)
PROVIDER_DEFAULT_MAX_OUTPUT_TOKENS = env_int("PROVIDER_DEFAULT_MAX_OUTPUT_TOKENS", 8192, minimum=1)
OFFLINE_PROVIDER_DELAY_MS = env_int("OFFLINE_PROVIDER_DELAY_MS", 0, minimum=0)
OPENCOMPANY_OFFLINE_CALL_LOG = env_str("OPENCOMPANY_OFFLINE_CALL_LOG")

# --- workflows (graph limits, agent parameter bounds, todos, archive outbox) -------------------
WORKFLOW_MAX_NODES = env_int("WORKFLOW_MAX_NODES", 200, minimum=1)
WORKFLOW_MAX_EDGES = env_int("WORKFLOW_MAX_EDGES", 1000, minimum=1)
WORKFLOW_MAX_GRAPH_BYTES = env_int("WORKFLOW_MAX_GRAPH_BYTES", 512 * 1024, minimum=1024)
WORKFLOW_NAME_MAX_CHARS = env_int("WORKFLOW_NAME_MAX_CHARS", 200, minimum=1, maximum=200)
WORKFLOW_NODE_TYPE_MAX_CHARS = env_int("WORKFLOW_NODE_TYPE_MAX_CHARS", 64, minimum=8)
WORKFLOW_AGENT_NAME_MAX_CHARS = env_int("WORKFLOW_AGENT_NAME_MAX_CHARS", 80, minimum=1)
WORKFLOW_AGENT_MODEL_MAX_CHARS = env_int("WORKFLOW_AGENT_MODEL_MAX_CHARS", 200, minimum=1)
WORKFLOW_AGENT_SYSTEM_PROMPT_MAX_CHARS = env_int("WORKFLOW_AGENT_SYSTEM_PROMPT_MAX_CHARS", 20_000, minimum=1)
WORKFLOW_AGENT_MAX_OUTPUT_TOKENS_LIMIT = env_int("WORKFLOW_AGENT_MAX_OUTPUT_TOKENS_LIMIT", 128_000, minimum=1)
WORKFLOW_AGENT_MAX_ITERATIONS_LIMIT = env_int("WORKFLOW_AGENT_MAX_ITERATIONS_LIMIT", 100, minimum=1)
WORKFLOW_LEGACY_TRANSCRIPT_MAX_CHARS = env_int("WORKFLOW_LEGACY_TRANSCRIPT_MAX_CHARS", 1_000_000, minimum=1)
WORKFLOW_TODOS_MAX_ITEMS = env_int("WORKFLOW_TODOS_MAX_ITEMS", 100, minimum=1)
WORKFLOW_TODOS_TEXT_MAX_CHARS = env_int("WORKFLOW_TODOS_TEXT_MAX_CHARS", 500, minimum=1)
# A claimed outbox row whose worker died is offered again after this many seconds.
WORKFLOW_ARCHIVE_CLAIM_TIMEOUT_S = env_int("WORKFLOW_ARCHIVE_CLAIM_TIMEOUT_S", 300, minimum=10)
WORKFLOW_ARCHIVE_MAX_ATTEMPTS = env_int("WORKFLOW_ARCHIVE_MAX_ATTEMPTS", 10, minimum=1)
CELERY_BEAT_SCHEDULE["workflows-drain-archive-outbox"] = {
    "task": "workflows.drain_archive_outbox",
    "schedule": timedelta(seconds=env_int("WORKFLOW_ARCHIVE_DRAIN_INTERVAL_S", 60, minimum=5)),
    "options": {"queue": CELERY_QUEUE_HOUSEKEEPING},
}
