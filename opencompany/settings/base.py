"""Settings for every environment, read from the environment with strict helpers.

With DATABASE_URL / REDIS_URL unset the embedded PostgreSQL and Redis are started (or
found running) under OPENCOMPANY_DATA_DIR; with them set, those servers are used and
nothing is started. See docs/deploy.md for production.
"""

import json
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url

from core import embedded
from core.env import env_bool, env_float, env_int, env_list, env_secret, env_str

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
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "csp",
    "channels",
    "core",
    "accounts",
    # App order is the order of Workflow Reset's listeners, and so its lock order after the workflow row: chat
    # session and runs, then firings, then conversation headers (never a header before a chat row). The triggers'
    # schedules come first of all (lock 1a, right after the workflow row).
    "triggers",
    "workflows",
    "memory",
    "mcp_nodes",
    "chat",
    "agents",
    "conversations",
    "provider_keys",
    "files",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "core.metrics.RequestMetricsMiddleware",
    # Outermost of ours: it sees every response, so any /api/ error leaves as JSON and an outage as a quick 503.
    "core.failfast.FailFastMiddleware",
    "core.middleware.RequestSizeLimitMiddleware",
    "core.middleware.UnstorableTextMiddleware",
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
# Under ASGI every request runs its sync code on a thread of its own, so Django's persistent connections are
# opened per request; a psycopg pool per process keeps them (Django's native pooling; CONN_MAX_AGE must be 0).
DB_POOL = env_bool("DB_POOL", True)
DATABASES = {
    "default": dj_database_url.parse(DATABASE_URL, conn_max_age=0 if DB_POOL else env_int("DB_CONN_MAX_AGE", 60))
}
# Web processes (opencompany/asgi.py and wsgi.py set OPENCOMPANY_WEB_PROCESS) fail fast: while PostgreSQL is down a
# request must answer 503 within a few seconds, not wait out a 10-second pool timeout (core/failfast.py).
# Workers and commands keep the patient defaults: they retry instead of answering anyone.
WEB_PROCESS = env_bool("OPENCOMPANY_WEB_PROCESS", False)
DB_CONNECT_TIMEOUT_SECONDS = env_int("DB_CONNECT_TIMEOUT_SECONDS", 2 if WEB_PROCESS else 10, minimum=2)
DB_WEB_STATEMENT_TIMEOUT_MS = env_int("DB_WEB_STATEMENT_TIMEOUT_MS", 15_000, minimum=0)
_db_options = DATABASES["default"].setdefault("OPTIONS", {})
_db_options["connect_timeout"] = DB_CONNECT_TIMEOUT_SECONDS
if WEB_PROCESS and DB_WEB_STATEMENT_TIMEOUT_MS:
    _db_options["options"] = f"-c statement_timeout={DB_WEB_STATEMENT_TIMEOUT_MS}"
if DB_POOL:
    _db_options["pool"] = {
        "min_size": env_int("DB_POOL_MIN_SIZE", 1, minimum=0),
        "max_size": env_int("DB_POOL_MAX_SIZE", 8, minimum=1),
        "timeout": env_float("DB_POOL_TIMEOUT_SECONDS", 2.0 if WEB_PROCESS else 10.0),
    }
# What a 503 `unavailable` tells clients to wait before retrying.
UNAVAILABLE_RETRY_AFTER_SECONDS = env_int("UNAVAILABLE_RETRY_AFTER_SECONDS", 5, minimum=1)
# With the pool this makes it check a connection before handing it out (one that died in a PostgreSQL restart is
# replaced); without it, Django checks a persistent connection at the start of each request.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
REDIS_URL = env_str("REDIS_URL") or embedded.ensure_redis()
USING_EMBEDDED_SERVICES = not env_str("DATABASE_URL") or not env_str("REDIS_URL")


CHANNEL_LAYER_SOCKET_TIMEOUT_SECONDS = env_float("CHANNEL_LAYER_SOCKET_TIMEOUT_SECONDS", 15.0)


def _channel_layer_host(url: str) -> dict:
    # A Redis restart leaves dead sockets in the layer's pools: check idle connections before use and retry a
    # command on a fresh connection, so the first socket after a restart does not fail.
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    return {
        "address": url,
        # The layer's receive blocks in BZPOPMIN for up to 5 s; redis-py 8 reads with a 5 s socket timeout by
        # default, so an idle socket's receive timed out, was retried, and after ~27 s closed the page's socket
        # with 1011. Reads get room beyond the blocking wait; connecting stays quick.
        "socket_timeout": CHANNEL_LAYER_SOCKET_TIMEOUT_SECONDS,
        "socket_connect_timeout": 2,
        "health_check_interval": 5,
        "socket_keepalive": True,
        "retry": Retry(ExponentialBackoff(cap=1.0, base=0.05), 4),
        "retry_on_error": [RedisConnectionError, RedisTimeoutError],
    }


CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [_channel_layer_host(REDIS_URL)], "capacity": 1000, "expiry": 30},
    }
}

# Short socket timeouts: the cache holds throttle counters and idempotency receipts, so a Redis outage must fail a
# request fast (503), not hang it.
REDIS_SOCKET_TIMEOUT_SECONDS = env_float("REDIS_SOCKET_TIMEOUT_SECONDS", 2.0)
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": REDIS_SOCKET_TIMEOUT_SECONDS},
    }
}

# --- Celery -----------------------------------------------------------------------------
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND")  # results are not required
CELERY_TASK_IGNORE_RESULT = CELERY_RESULT_BACKEND is None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_DEFAULT_QUEUE = "housekeeping"
CELERY_QUEUE_AGENT = "agent"
CELERY_QUEUE_HOUSEKEEPING = "housekeeping"
CELERY_TASK_ROUTES = {
    name: {"queue": CELERY_QUEUE_AGENT}
    for name in ("agent.prepare_payload", "agent.execute_llm_step", "agent.persist_turn", "agent.compact_context")
}
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=60)}
CELERY_TASK_ALWAYS_EAGER = False
# Celery's Django fixup closes the database connection around every task unless this is set; opening one per task
# was most of a task's cost. Broken or old connections are still dropped per task (opencompany/celery.py).
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 1000, minimum=1)
CELERY_WORKER_HEARTBEAT_KEY = "opencompany:worker-heartbeat"
CELERY_WORKER_HEARTBEAT_TTL = env_int("CELERY_WORKER_HEARTBEAT_TTL", 30, minimum=5)
# Every worker writes a heartbeat per queue it consumes this often, from its own thread (not beat's schedule), so
# /healthz/ready can tell "no agent worker" from "no housekeeping worker".
CELERY_WORKER_HEARTBEAT_INTERVAL = env_int("CELERY_WORKER_HEARTBEAT_INTERVAL", 10, minimum=1)
# /healthz/ready answers within this many seconds whatever is down.
HEALTH_CHECK_TIMEOUT_SECONDS = env_float("HEALTH_CHECK_TIMEOUT_SECONDS", 1.5)
CELERY_BEAT_SCHEDULE = {
    "worker-heartbeat": {"task": "opencompany.worker_heartbeat", "schedule": timedelta(seconds=10)},
}

# --- Auth, API --------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": env_int("PASSWORD_MIN_LENGTH", 12, minimum=12)},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# How many proxies of the operator's own stand in front of the web processes, each appending the address it saw to
# X-Forwarded-For; the client is the N-th entry from the right. 0 (the default): the header is ignored and the
# client is the connection's peer (core/client_address.py, docs/deploy.md "Rate limits").
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0, minimum=0, maximum=10)
REST_FRAMEWORK = {
    # DRF's own reading of the header agrees with core/client_address.py (whose function the throttles use).
    "NUM_PROXIES": TRUSTED_PROXY_COUNT,
    # Token first: its WWW-Authenticate header makes an anonymous API call answer 401, not 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "core.schema.AutoSchema",
    "EXCEPTION_HANDLER": "core.errors.api_exception_handler",
    "DEFAULT_PAGINATION_CLASS": None,
    # The API speaks JSON only (pages post forms to Django views, not to the API).
    "DEFAULT_PARSER_CLASSES": ["core.parsers.BoundedJSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "DEFAULT_THROTTLE_CLASSES": [
        "core.throttles.ApiUserThrottle",
        "core.throttles.ScopedSettingThrottle",
    ],
}
# Rate limits ("<count>/<second|minute|hour|day>"), counted in the cache; see core/throttles.py.
THROTTLE_RATES = {
    "user": env_str("THROTTLE_RATE_API_USER", "1200/minute"),  # every API request, per user
    "chat_send": env_str("THROTTLE_RATE_CHAT_SEND", "30/minute"),  # chat send, edit, try again, per user
    "login": env_str("THROTTLE_RATE_LOGIN", "20/minute"),  # failed login attempts, per client IP
    # failed login attempts per account (the username tried), from any address
    "login_account": env_str("THROTTLE_RATE_LOGIN_ACCOUNT", "30/hour"),
    "token": env_str("THROTTLE_RATE_TOKEN", "10/hour"),  # API token creation, per client IP
    "file_upload": env_str("THROTTLE_RATE_FILE_UPLOAD", "60/minute"),  # file uploads (POST /api/files/), per user
}
# A workflow page's socket may send at most this many messages per window; past it the socket is closed (4429).
SOCKET_MESSAGE_LIMIT = env_int("SOCKET_MESSAGE_LIMIT", 120, minimum=1)
SOCKET_MESSAGE_WINDOW_SECONDS = env_int("SOCKET_MESSAGE_WINDOW_SECONDS", 60, minimum=1)
SPECTACULAR_SETTINGS = {
    "TITLE": "OpenCompany API",
    "DESCRIPTION": "Workflows of AI agents with exact Context and a durable memory tool.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and the docs page are for signed-in owners and token holders, like the rest of the API
    # (docs/security.md): an anonymous request answers 401.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SERVE_AUTHENTICATION": None,
    # Swagger UI from the installed sidecar package (no CDN), its start-up script as a file of its own (the
    # split view), so the docs page runs under the same CSP as every other page.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

# --- Metrics (core/metrics.py) ---------------------------------------------------
# /metrics is readable by staff sessions, and by `Authorization: Bearer <METRICS_TOKEN>` when this is set.
METRICS_TOKEN = env_str("METRICS_TOKEN")
METRICS_TURN_WINDOW_SECONDS = env_int("METRICS_TURN_WINDOW_SECONDS", 300, minimum=10)

# --- Idempotency keys (core/idempotency.py) ---------------------------------------
IDEMPOTENCY_RECEIPT_TTL_HOURS = env_int("IDEMPOTENCY_RECEIPT_TTL_HOURS", 24, minimum=1)
CELERY_BEAT_SCHEDULE["opencompany-purge-idempotency-receipts"] = {
    "task": "opencompany.purge_idempotency_receipts",
    "schedule": timedelta(hours=1),
    "options": {"queue": CELERY_QUEUE_HOUSEKEEPING},
}

# --- Limits -----------------------------------------------------------------------------
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 2 * 1024 * 1024, minimum=1024)
# Any request body past this answers 413 `request_too_large` before it is read.
REQUEST_MAX_BYTES = env_int("REQUEST_MAX_BYTES", 2 * 1024 * 1024, minimum=1024)
REQUEST_MAX_JSON_DEPTH = env_int("REQUEST_MAX_JSON_DEPTH", 32, minimum=4, maximum=200)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Content-hashed names (chat.3f9a1c.js) once `collectstatic` has run (`dev.py run` does, and sets this): a browser
# never keeps an old script after a deploy, and the hashed files are served with a year-long immutable cache
# (core/static_files.py). Django names hashed files only with DEBUG off. Off by default with DEBUG on, so a
# checkout works without collecting first.
STATIC_HASHED = env_bool("STATIC_HASHED", not DEBUG)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"
        if STATIC_HASHED
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            "()": "core.logfmt.KeyValueFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        }
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "WARNING"}, "httpx2": {"level": "WARNING"}},
}

# --- Production hardening (DEBUG off) ---------------------------------------------------
# X-Forwarded-Proto is a header any client can send; it means something only when a proxy in front of us
# overwrites it. Trust it only when the deployment says so.
if env_bool("SECURE_PROXY_SETS_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)

# --- Content-Security-Policy (django-csp): scripts and styles from our own origin or with this response's nonce;
# nothing inline without one, no eval, no framing, no plugins. Static responses get the same header
# (opencompany/asgi.py), so a file served by us cannot be framed or run inline code either.
from csp.constants import NONCE, NONE, SELF  # noqa: E402

CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, NONCE],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
# The header static responses carry (no nonce there: a static file runs no inline code).
STATIC_CONTENT_SECURITY_POLICY = (
    "default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

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
# Vertex managed agents (provider "vertex_agent"): a service account key (JSON text) or an OAuth access token, else
# the file GOOGLE_APPLICATION_CREDENTIALS names; never the metadata server. A service account signs in only at
# VERTEX_AGENT_TOKEN_URIS (comma separated; Google's token endpoint by default).
VERTEX_AGENT_CREDENTIALS = env_str("VERTEX_AGENT_CREDENTIALS")
VERTEX_AGENT_BASE_URL = env_str("VERTEX_AGENT_BASE_URL")
VERTEX_AGENT_TOKEN_URIS = env_str("VERTEX_AGENT_TOKEN_URIS") or "https://oauth2.googleapis.com/token"
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
# A Workflow Reset that deadlocks with a concurrent prepare (docs/architecture.md#reset-deadlock) is tried again this
# many times before the API answers 409 `reset_busy`.
WORKFLOW_RESET_DEADLOCK_RETRIES = env_int("WORKFLOW_RESET_DEADLOCK_RETRIES", 3, minimum=0)
WORKFLOW_LEGACY_TRANSCRIPT_MAX_CHARS = env_int("WORKFLOW_LEGACY_TRANSCRIPT_MAX_CHARS", 1_000_000, minimum=1)
WORKFLOW_TODOS_MAX_ITEMS = env_int("WORKFLOW_TODOS_MAX_ITEMS", 100, minimum=1)
WORKFLOW_TODOS_TEXT_MAX_CHARS = env_int("WORKFLOW_TODOS_TEXT_MAX_CHARS", 500, minimum=1)
WORKFLOW_EDITOR_VALIDATE_DELAY_MS = env_int("WORKFLOW_EDITOR_VALIDATE_DELAY_MS", 350, minimum=0)
# A claimed outbox row whose worker died is offered again after this many seconds.
WORKFLOW_ARCHIVE_CLAIM_TIMEOUT_S = env_int("WORKFLOW_ARCHIVE_CLAIM_TIMEOUT_S", 300, minimum=10)
WORKFLOW_ARCHIVE_MAX_ATTEMPTS = env_int("WORKFLOW_ARCHIVE_MAX_ATTEMPTS", 10, minimum=1)
CELERY_BEAT_SCHEDULE["workflows-drain-archive-outbox"] = {
    "task": "workflows.drain_archive_outbox",
    "schedule": timedelta(seconds=env_int("WORKFLOW_ARCHIVE_DRAIN_INTERVAL_S", 60, minimum=5)),
    "options": {"queue": CELERY_QUEUE_HOUSEKEEPING},
}

# --- conversations (the conversation store, usage ledger, Context panel) ----------------
# A stored conversation larger than this (serialized bytes) is refused on load: the owner must clear the Context.
CONVERSATION_SEED_MAX_BYTES = env_int("CONVERSATION_SEED_MAX_BYTES", 1_000_000, minimum=1024)
# Tool results are cut to this many characters before they enter a transcript (a per-owner setting may lower it).
TOOL_RESULT_MAX_CHARS = env_int("TOOL_RESULT_MAX_CHARS", 100_000, minimum=100)
# Past this many serialized bytes, results of earlier turns are replaced by a placeholder (down to half of it).
CONVERSATION_TOOL_RESULT_BUDGET_BYTES = env_int("CONVERSATION_TOOL_RESULT_BUDGET_BYTES", 400_000, minimum=1024)
# How many conversations each process keeps a verified copy of, so an appended turn's save does not re-hash the list.
CONVERSATION_CACHE_ENTRIES = env_int("CONVERSATION_CACHE_ENTRIES", 64, minimum=0)
# ...and at most this many serialized bytes of them in all (the parsed copies take a few times that in memory).
CONVERSATION_CACHE_MAX_BYTES = env_int("CONVERSATION_CACHE_MAX_BYTES", 16 * 1024 * 1024, minimum=0)
# A firing holds its conversation's lease this long unless it renews; a dead worker's lease expires after it.
FIRING_LEASE_TTL_SECONDS = env_int("FIRING_LEASE_TTL_SECONDS", 600, minimum=5)
CONVERSATION_API_PAGE_SIZE = env_int("CONVERSATION_API_PAGE_SIZE", 100, minimum=1, maximum=1000)

# --- memory (the `memory` tool: namespaces, FTS + pgvector recall, receipts, expiry) ------
MEMORY_EMBEDDER = env_str("MEMORY_EMBEDDER", "minilm")  # minilm | none | openai | local | package.module:ClassName
MEMORY_OPENAI_EMBEDDING_MODEL = env_str("MEMORY_OPENAI_EMBEDDING_MODEL", "text-embedding-3-small")
MEMORY_OPENAI_EMBEDDING_DIMS = env_int("MEMORY_OPENAI_EMBEDDING_DIMS", 0, minimum=0) or None
MEMORY_EMBED_TIMEOUT_S = env_float("MEMORY_EMBED_TIMEOUT_S", 10.0)
MEMORY_CONTENT_MAX_BYTES = env_int("MEMORY_CONTENT_MAX_BYTES", 16 * 1024, minimum=1)
MEMORY_TITLE_MAX_CHARS = env_int("MEMORY_TITLE_MAX_CHARS", 200, minimum=1, maximum=200)
MEMORY_CATEGORY_MAX_CHARS = env_int("MEMORY_CATEGORY_MAX_CHARS", 50, minimum=1, maximum=50)
MEMORY_TAGS_MAX = env_int("MEMORY_TAGS_MAX", 20, minimum=0)
MEMORY_TAG_MAX_CHARS = env_int("MEMORY_TAG_MAX_CHARS", 50, minimum=1, maximum=50)
MEMORY_QUERY_MAX_CHARS = env_int("MEMORY_QUERY_MAX_CHARS", 1000, minimum=1)
MEMORY_LIMIT_DEFAULT = env_int("MEMORY_LIMIT_DEFAULT", 10, minimum=1)
MEMORY_LIMIT_MAX = env_int("MEMORY_LIMIT_MAX", 50, minimum=1)
MEMORY_ITEMS_PER_NAMESPACE_MAX = env_int("MEMORY_ITEMS_PER_NAMESPACE_MAX", 10_000, minimum=1)
# Nearest vectors fused per recall; the HNSW walk grows with it (bench: 100 -> 40 cut hybrid time ~3x, 40 -> 20 by
# ~40%, recall@5 the same each time).
MEMORY_RECALL_VECTOR_CANDIDATES = env_int("MEMORY_RECALL_VECTOR_CANDIDATES", 20, minimum=1)
# How wide the HNSW walk searches (pgvector's hnsw.ef_search; never below the candidates). Wider finds more of the
# true nearest vectors at a latency cost. The benchmark's paraphrases were missed for another reason (their memories
# are outliers the main graph barely links to; docs/memory.md): the outlier index below finds them, and with it a
# 20-wide walk finds what a 40-wide one did (keyword 30, paraphrase 20 of 30) in ~60% of the statement's time.
MEMORY_RECALL_HNSW_EF_SEARCH = env_int("MEMORY_RECALL_HNSW_EF_SEARCH", 20, minimum=1, maximum=1000)
MEMORY_RECALL_RRF_K = env_int("MEMORY_RECALL_RRF_K", 60, minimum=1)
# Cosine distance above which a vector neighbour is not a match (all-MiniLM: unrelated texts sit near 0.8-1.0).
MEMORY_RECALL_MAX_DISTANCE = env_float("MEMORY_RECALL_MAX_DISTANCE", 0.75)
# A stored vector with no other vector of its model nearer than this (cosine distance) is an outlier and is also
# indexed in a small HNSW index of its own, which recall walks beside the main one (memory/outliers.py). With
# all-MiniLM, texts that say nearly the same thing sit within ~0.25; in the benchmark's corpus every generated item
# has a neighbour within 0.26 and every hand-written one none within 0.29. Higher marks fewer (a smaller second
# walk); 2 marks none (recall is then the main walk alone).
MEMORY_VECTOR_OUTLIER_DISTANCE = env_float("MEMORY_VECTOR_OUTLIER_DISTANCE", 0.28)
# How wide the probe that decides it walks (only overestimates the nearest distance, so it errs towards marking).
MEMORY_VECTOR_OUTLIER_EF_SEARCH = env_int("MEMORY_VECTOR_OUTLIER_EF_SEARCH", 20, minimum=1, maximum=1000)
# How many of the outlier index's nearest vectors join the main walk's candidates (ranked together by distance).
MEMORY_RECALL_OUTLIER_CANDIDATES = env_int("MEMORY_RECALL_OUTLIER_CANDIDATES", 10, minimum=0)
# Full-text recall ranks every match among the namespace's newest MEMORY_RECALL_FTS_WINDOW items; when at least
# MEMORY_RECALL_FTS_BROAD_MATCHES of them match, older matches are ranked only when salient (a query word in the
# title or twice in the content). See memory/selectors.py and docs/memory.md (what ranking that gives up).
MEMORY_RECALL_FTS_WINDOW = env_int("MEMORY_RECALL_FTS_WINDOW", 4_000, minimum=100)
MEMORY_RECALL_FTS_BROAD_MATCHES = env_int("MEMORY_RECALL_FTS_BROAD_MATCHES", 60, minimum=51)
MEMORY_RECEIPT_TTL_HOURS = env_int("MEMORY_RECEIPT_TTL_HOURS", 48, minimum=1)
MEMORY_REINDEX_BATCH_SIZE = env_int("MEMORY_REINDEX_BATCH_SIZE", 128, minimum=1)
MEMORY_PURGE_INTERVAL_S = env_int("MEMORY_PURGE_INTERVAL_S", 300, minimum=10)
CELERY_BEAT_SCHEDULE["memory-purge-expired"] = {
    "task": "memory.purge_expired",
    "schedule": timedelta(seconds=MEMORY_PURGE_INTERVAL_S),
}

# --- agents (the runtime) -----------------------------------------------------------------
# "celery": steps are Celery tasks on the `agent` queue. "inline": the same steps run in this process (tests, demo).
AGENT_EXECUTION_MODE = env_str("AGENT_EXECUTION_MODE", "celery")
AGENT_MAX_PROMPT_CHARS = env_int("AGENT_MAX_PROMPT_CHARS", 32_000, minimum=100)
AGENT_MAX_ITERATIONS = env_int("AGENT_MAX_ITERATIONS", 12, minimum=1)
AGENT_MAX_WALL_SECONDS = env_int("AGENT_MAX_WALL_SECONDS", 600, minimum=5)
# Agent runtimes (providers/runtimes/): each conversation's CLI state (Claude Code's config dir and session
# transcripts, the emptied working directory) lives under this directory. Keep it on a volume the workers keep:
# a session resumes only while its transcript is here (else the next firing starts a new one from a portable
# transcript, and says so).
AGENT_RUNTIME_DIR = env_str("AGENT_RUNTIME_DIR") or str(DATA_DIR / "runtimes")
AGENT_MAX_TOKENS_PER_FIRING = env_int("AGENT_MAX_TOKENS_PER_FIRING", 400_000, minimum=100)
AGENT_COMPACTION_THRESHOLD = env_float("AGENT_COMPACTION_THRESHOLD", 0.8)
# A conversation is also compacted when its stored size reaches this share of CONVERSATION_SEED_MAX_BYTES, whatever
# the window: a 1M-token model would reach the byte cap long before 80% of its window.
AGENT_COMPACTION_BYTE_SHARE = env_float("AGENT_COMPACTION_BYTE_SHARE", 0.75)
AGENT_MAX_DELEGATION_DEPTH = env_int("AGENT_MAX_DELEGATION_DEPTH", 3, minimum=1)
AGENT_LEASE_RETRY_SECONDS = env_float("AGENT_LEASE_RETRY_SECONDS", 0.2)
AGENT_STOP_POLL_SECONDS = env_float("AGENT_STOP_POLL_SECONDS", 0.2)
# A running provider call touches its step row this often; a row silent for LOST_AFTER means the worker is gone.
AGENT_STEP_HEARTBEAT_SECONDS = env_float("AGENT_STEP_HEARTBEAT_SECONDS", 2.0)
AGENT_STEP_LOST_AFTER_SECONDS = env_int("AGENT_STEP_LOST_AFTER_SECONDS", 20, minimum=2)
AGENT_PERSIST_GRACE_SECONDS = env_int("AGENT_PERSIST_GRACE_SECONDS", 15, minimum=1)
# A queued firing untouched this long has its prepare sent again (once per period): a broker restarted empty
# delays queued turns by this much instead of losing them.
AGENT_QUEUED_RESEND_SECONDS = env_int("AGENT_QUEUED_RESEND_SECONDS", 5, minimum=1)
AGENT_DELIVERY_TIMEOUT_SECONDS = env_int("AGENT_DELIVERY_TIMEOUT_SECONDS", 300, minimum=5)
AGENT_TIMEOUT_GRACE_SECONDS = env_int("AGENT_TIMEOUT_GRACE_SECONDS", 30, minimum=0)
# Spending limits (accounts.budget): a provider call reserves its estimate until it is billed; one whose agent sets
# no output cap is taken to answer this many tokens. A reservation never billed (a process lost between its
# reservation and its claim being seen) stops counting after the TTL.
BUDGET_RESERVATION_OUTPUT_TOKENS = env_int("BUDGET_RESERVATION_OUTPUT_TOKENS", 4096, minimum=1)
BUDGET_RESERVATION_TTL_SECONDS = env_int("BUDGET_RESERVATION_TTL_SECONDS", 3600, minimum=60)
# Tool calls that ask first (docs/tools.md#approvals): how long a call waits for the owner's decision before it
# counts as declined (the watchdog expires it), and the longest reason a decision may carry.
TOOL_APPROVAL_TIMEOUT_SECONDS = env_int("TOOL_APPROVAL_TIMEOUT_SECONDS", 24 * 3600, minimum=10)
# An agent runtime's run waits inside its one step for a decision on a tool that asks first: shorter, then denied.
TOOL_APPROVAL_RUNTIME_TIMEOUT_SECONDS = env_int("TOOL_APPROVAL_RUNTIME_TIMEOUT_SECONDS", 300, minimum=1)
TOOL_APPROVAL_REASON_MAX_CHARS = env_int("TOOL_APPROVAL_REASON_MAX_CHARS", 2000, minimum=10)
CELERY_BEAT_SCHEDULE["agent-watchdog"] = {
    "task": "agents.watchdog",
    "schedule": timedelta(seconds=env_int("AGENT_WATCHDOG_INTERVAL_SECONDS", 5, minimum=1)),
    "options": {"queue": CELERY_QUEUE_HOUSEKEEPING},
}

# Ended firings (their steps and tool results) are kept this long for run history, then pruned; the usage
# ledger is kept regardless.
AGENT_FIRING_RETENTION_DAYS = env_int("AGENT_FIRING_RETENTION_DAYS", 30, minimum=1)
CELERY_BEAT_SCHEDULE["agent-prune-firings"] = {
    "task": "agents.prune_firings",
    "schedule": timedelta(seconds=env_int("AGENT_PRUNE_INTERVAL_SECONDS", 3600, minimum=60)),
    "options": {"queue": CELERY_QUEUE_HOUSEKEEPING},
}

# --- chat (the owner's chat: runs and the lane, streaming, branch snapshots, notes) ------------------------
CHAT_MESSAGE_MAX_CHARS = env_int("CHAT_MESSAGE_MAX_CHARS", 20_000, minimum=1)
CHAT_MAX_SNAPSHOTS_PER_SESSION = env_int("CHAT_MAX_SNAPSHOTS_PER_SESSION", 200, minimum=1)
CHAT_MAX_SNAPSHOT_BYTES = env_int("CHAT_MAX_SNAPSHOT_BYTES", 2_000_000, minimum=1024)
CHAT_RUN_STREAM_TTL_SECONDS = env_int("CHAT_RUN_STREAM_TTL_SECONDS", 86_400, minimum=60)
# How long a run event that cannot take its seq (Redis unreachable) is retried before it is given up on (the next
# event then shows the gap and pages refetch). A delta batch keeps its text past this and sends it with the next one.
CHAT_EVENT_RETRY_SECONDS = env_float("CHAT_EVENT_RETRY_SECONDS", 30.0)
# How long admitting a run waits for its run.started to go out before queuing the firing's first task.
CHAT_RUN_STARTED_SEND_WAIT_SECONDS = env_float("CHAT_RUN_STARTED_SEND_WAIT_SECONDS", 1.0)
# The chat watchdog: a run whose firing no worker started, or that outlived every limit, is ended.
CHAT_RUN_DELIVERY_TIMEOUT_SECONDS = env_int("CHAT_RUN_DELIVERY_TIMEOUT_SECONDS", 330, minimum=5)
CHAT_RUN_MAX_SECONDS = env_int("CHAT_RUN_MAX_SECONDS", 1800, minimum=10)
CHAT_RUN_LOST_GRACE_SECONDS = env_int("CHAT_RUN_LOST_GRACE_SECONDS", 10, minimum=1)
CELERY_BEAT_SCHEDULE["chat-watchdog"] = {
    "task": "chat.watchdog",
    "schedule": timedelta(seconds=env_int("CHAT_WATCHDOG_INTERVAL_SECONDS", 15, minimum=1)),
    "options": {"queue": CELERY_QUEUE_HOUSEKEEPING},
}

# --- triggers (triggers/, docs/triggers.md) ------------------------------------------------------------------------
# The sweep claims due schedules this often; a due time fires within this many seconds of it.
TRIGGERS_SWEEP_SECONDS = env_int("TRIGGERS_SWEEP_SECONDS", 15, minimum=1)
TRIGGERS_SWEEP_BATCH = env_int("TRIGGERS_SWEEP_BATCH", 500, minimum=1)
# Turns a schedule keeps waiting for its busy agent; further due times are recorded as skipped.
TRIGGERS_MAX_QUEUED_TURNS = env_int("TRIGGERS_MAX_QUEUED_TURNS", 1, minimum=1)
# A queued fire whose delivery task has not settled it this long is sent again (a broker restarted empty).
TRIGGERS_RESEND_AFTER_SECONDS = env_int("TRIGGERS_RESEND_AFTER_SECONDS", 60, minimum=5)
# Webhook deliveries: the body cap, the signature's time window (against replays) and a per-hook rate.
TRIGGERS_WEBHOOK_MAX_BYTES = env_int("TRIGGERS_WEBHOOK_MAX_BYTES", 64 * 1024, minimum=1024)
TRIGGERS_WEBHOOK_TOLERANCE_SECONDS = env_int("TRIGGERS_WEBHOOK_TOLERANCE_SECONDS", 300, minimum=10)
TRIGGERS_WEBHOOK_RATE_PER_MINUTE = env_int("TRIGGERS_WEBHOOK_RATE_PER_MINUTE", 60, minimum=1)
# Refused deliveries are counted (for /metrics) in windows of this length; a window's counters expire with it.
TRIGGERS_WEBHOOK_REFUSED_WINDOW_SECONDS = env_int("TRIGGERS_WEBHOOK_REFUSED_WINDOW_SECONDS", 3600, minimum=60)
CELERY_BEAT_SCHEDULE["triggers-sweep"] = {
    "task": "triggers.sweep",
    "schedule": timedelta(seconds=TRIGGERS_SWEEP_SECONDS),
    "options": {"queue": CELERY_QUEUE_HOUSEKEEPING},
}

# --- accounts (API tokens, spending limits) -------------------------------------------------------------------------
API_TOKEN_DEFAULT_DAYS = env_int("API_TOKEN_DEFAULT_DAYS", 90, minimum=1)
API_TOKEN_MAX_DAYS = env_int("API_TOKEN_MAX_DAYS", 365, minimum=1)
API_TOKENS_PER_OWNER_MAX = env_int("API_TOKENS_PER_OWNER_MAX", 20, minimum=1)
# `last_used_at` is written at most this often per token, so a busy client does not write on every request.
API_TOKEN_LAST_USED_RESOLUTION_S = env_int("API_TOKEN_LAST_USED_RESOLUTION_S", 60, minimum=0)

# --- sockets ---------------------------------------------------------------------------------------------------------
# The origins a page may open a socket from, exactly (scheme://host[:port]). Unset: the http(s) origins of
# ALLOWED_HOSTS and CSRF_TRUSTED_ORIGINS on the port the server listens on (see core/origins.py).
WEBSOCKET_ALLOWED_ORIGINS = env_list("WEBSOCKET_ALLOWED_ORIGINS", [])
WEBSOCKET_MAX_FRAME_BYTES = env_int("WEBSOCKET_MAX_FRAME_BYTES", 4096, minimum=64)
WEBSOCKET_MAX_FRAME_DEPTH = env_int("WEBSOCKET_MAX_FRAME_DEPTH", 4, minimum=1, maximum=32)
# How often an open socket re-checks that its session and its workflow still exist (the logout, password change
# and delete paths also close sockets at once; this is the net under them).
WEBSOCKET_RECHECK_SECONDS = env_float("WEBSOCKET_RECHECK_SECONDS", 30.0)
# How often an open socket re-joins its groups and compares the hub epoch: group membership lives in Redis, so a
# Redis that restarted empty forgot it; within this time the socket hears again and tells its page to refetch.
WEBSOCKET_REJOIN_SECONDS = env_float("WEBSOCKET_REJOIN_SECONDS", 5.0)
# Owners' own provider keys (provider_keys, docs/security.md "Owners' provider keys"). The first Fernet key
# encrypts, all decrypt (rotation: add a new key first, run `manage.py rotate_provider_keys`, drop the old one).
# Unset: a key derived from SECRET_KEY.
PROVIDER_KEYS_ENCRYPTION_KEYS = env_list("PROVIDER_KEYS_ENCRYPTION_KEYS", [])
# Owners' base URLs: https only unless this allows http; hosts staff vouch for skip the private-address check
# (also editable in admin as "Allowed provider hosts").
PROVIDER_BASE_URL_ALLOW_HTTP = env_bool("PROVIDER_BASE_URL_ALLOW_HTTP", False)
PROVIDER_BASE_URL_ALLOWED_HOSTS = env_list("PROVIDER_BASE_URL_ALLOWED_HOSTS", [])

# --- MCP servers as tool nodes (mcp_nodes/, docs/tools.md) --------------------------------
# The stdio servers owners may pick by name; an owner never types a command. JSON: {"name": {"argv": [...],
# "env": {...}, "label": "..."}}. Each starts without the worker's environment (only PATH, HOME and the like, plus
# its own "env") and under the limits below.
MCP_STDIO_SERVERS = json.loads(env_str("MCP_STDIO_SERVERS") or "{}")
MCP_STDIO_MEMORY_BYTES = env_int("MCP_STDIO_MEMORY_BYTES", 2 * 1024**3, minimum=64 * 1024**2)
MCP_STDIO_CPU_SECONDS = env_int("MCP_STDIO_CPU_SECONDS", 120, minimum=1)
MCP_STDIO_OPEN_FILES = env_int("MCP_STDIO_OPEN_FILES", 256, minimum=16)
# Each worker process keeps the stdio servers it started for later calls (one per concurrent call), and ends one idle
# this long (seconds); 0 starts a server per call (mcp_nodes/stdio.py).
MCP_STDIO_IDLE_SECONDS = env_int("MCP_STDIO_IDLE_SECONDS", 300, minimum=0)
# Hosts an HTTP MCP server URL may name although they resolve to a private or loopback address (host or host:port);
# such a host may also use plain http. Every other URL is https to a public address, checked on save and each connect.
MCP_HTTP_ALLOWED_HOSTS = env_list("MCP_HTTP_ALLOWED_HOSTS", [])
MCP_HTTP_ALLOW_HTTP = env_bool("MCP_HTTP_ALLOW_HTTP", False)
# A node's call timeout unless it sets its own (seconds), and the ceiling it may set.
MCP_CALL_TIMEOUT_SECONDS = env_int("MCP_CALL_TIMEOUT_SECONDS", 60, minimum=1)
MCP_CALL_TIMEOUT_MAX_SECONDS = env_int("MCP_CALL_TIMEOUT_MAX_SECONDS", 600, minimum=1)
# A call recorded `started` whose worker gave no answer this long after its timeout was lost with it: `ambiguous`.
MCP_CALL_LOST_GRACE_SECONDS = env_int("MCP_CALL_LOST_GRACE_SECONDS", 15, minimum=1)
# Bytes of one server response read at most (a flood is cut off), and tools listed at most.
MCP_RESPONSE_MAX_BYTES = env_int("MCP_RESPONSE_MAX_BYTES", 4 * 1024 * 1024, minimum=1024)
MCP_MAX_TOOLS = env_int("MCP_MAX_TOOLS", 200, minimum=1)

# --- Attached files (files/, docs/chat.md#files, docs/deploy.md#file-storage) -----------------------------------
# Bytes live once per SHA-256 in the storage named FILE_STORAGE: local disk under the data folder by default;
# FILE_STORAGE_BACKEND=s3 puts them in an S3-compatible bucket through django-storages.
FILE_STORAGE = "files"
if env_str("FILE_STORAGE_BACKEND", "local").lower() == "s3":
    STORAGES[FILE_STORAGE] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env_str("FILE_STORAGE_BUCKET"),
            "endpoint_url": env_str("FILE_STORAGE_ENDPOINT_URL") or None,
            "region_name": env_str("FILE_STORAGE_REGION") or None,
            "access_key": env_str("FILE_STORAGE_ACCESS_KEY_ID") or None,
            "secret_key": env_str("FILE_STORAGE_SECRET_ACCESS_KEY") or None,
            "location": env_str("FILE_STORAGE_PREFIX", "files"),
            # Objects are private and read only through the app (owner check first): no public ACL, no signed URLs.
            "default_acl": "private",
            "querystring_auth": False,
            "file_overwrite": True,
        },
    }
else:
    STORAGES[FILE_STORAGE] = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {
            "location": env_str("FILE_STORAGE_DIR") or str(DATA_DIR / "files"),
            "file_permissions_mode": 0o600,
            "directory_permissions_mode": 0o700,
        },
    }
FILE_MAX_BYTES = env_int("FILE_MAX_BYTES", 10 * 1024 * 1024, minimum=1024)  # one file
FILE_MESSAGE_MAX_BYTES = env_int("FILE_MESSAGE_MAX_BYTES", 20 * 1024 * 1024, minimum=1024)  # one message's files
FILE_MESSAGE_MAX_FILES = env_int("FILE_MESSAGE_MAX_FILES", 10, minimum=1)
FILE_OWNER_QUOTA_BYTES = env_int("FILE_OWNER_QUOTA_BYTES", 1024**3, minimum=1024)  # each distinct file once
# A file nothing refers to is removed by the sweep once it is this old, so an upload about to be sent stays.
FILE_ORPHAN_GRACE_SECONDS = env_int("FILE_ORPHAN_GRACE_SECONDS", 24 * 3600, minimum=60)
CELERY_BEAT_SCHEDULE["files-sweep-orphans"] = {
    "task": "files.sweep_orphans",
    "schedule": timedelta(seconds=env_int("FILE_SWEEP_INTERVAL_SECONDS", 3600, minimum=60)),
    "options": {"queue": CELERY_QUEUE_HOUSEKEEPING},
}
# An upload's request may be as large as one file plus its multipart framing (REQUEST_MAX_BYTES stays for the rest).
REQUEST_MAX_BYTES_BY_PATH = {"/api/files/": FILE_MAX_BYTES + 64 * 1024}
