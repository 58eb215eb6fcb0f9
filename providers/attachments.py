"""What an attached file (a `file` block, providers/wire.py) becomes in one request to one model.

The stored conversation holds a reference; each adapter asks a `FilePlan` for every file block of the request it
builds and renders the answer in its provider's documented form (providers/README.md#files):

- `native`: the bytes go as the provider's image or document part;
- `text`: the document's text goes as text (a PDF's extracted with pypdf), for a model the catalogue marks as not
  taking documents, or a file a provider's documented limit keeps out of an earlier turn;
- `placeholder`: a line naming the file goes instead (an image for a text-only model, bytes no longer stored, a file
  the limits keep out of an earlier turn that has no text).

A file of the message being answered that a documented limit refuses (a PDF over the page limit, a request over
the size limit) ends the turn with `FileRefused`, naming the file and the limit, before anything is sent. The same
file in an earlier turn is sent as its text or a placeholder instead: a refused turn never makes the stored
conversation unanswerable.

`files_support(provider, model)` says, before sending, what each kind of file will become for a model.
"""

from __future__ import annotations

import base64
import contextvars
import io
import logging
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .catalogue import capabilities
from .errors import InvalidRequestError
from .files import FileUnavailable, read_file_bytes

logger = logging.getLogger("providers")

IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")
PDF_TYPE = "application/pdf"
TEXT_TYPES = ("text/plain", "text/markdown", "text/csv", "application/json")
# The extracted text of one document sent as text is cut here (a note says so): a 2,000-page PDF must not become a
# request no model can take.
MAX_TEXT_CHARS = 400_000
# The agent runtimes that get files written into their working directory (the CLIs) or as interaction input.
WORKSPACE_RUNTIMES = ("claude_code", "codex_cli", "rlm")


class FileRefused(InvalidRequestError):
    """A file of the message being answered that the provider's documented limits refuse; nothing was sent."""


def kind_of(media_type: str) -> str:
    """ "image", "pdf", "text" or "other" for a file's media type."""
    if media_type in IMAGE_TYPES:
        return "image"
    if media_type == PDF_TYPE:
        return "pdf"
    if media_type in TEXT_TYPES or media_type.startswith("text/"):
        return "text"
    return "other"


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def describe(block: dict) -> str:
    """`"report.pdf" (application/pdf, 34 KB)`: how a file is named in placeholders, transcripts and summaries."""
    return f'"{block.get("name", "file")}" ({block.get("media_type", "?")}, {human_size(int(block.get("size") or 0))})'


def reference(block: dict) -> str:
    """The file's stable reference in text that outlives the block (a compaction summary): name, type, size, hash."""
    return f"[file {describe(block)} sha256:{block.get('sha256', '')}]"


# --- reading and extracting, cached by content hash (the bytes behind a hash never change) --------------------------


class _Lru:
    """A small least-recently-used cache shared by a worker's threads."""

    def __init__(self, size: int):
        self.size = size
        self.items: OrderedDict = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key):
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
            return None

    def put(self, key, value) -> None:
        with self.lock:
            self.items[key] = value
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)


_pdf_info = _Lru(64)  # sha256 -> (pages, text)
_image_dims = _Lru(256)  # sha256 -> (width, height)


def pdf_info(sha256: str, data: bytes) -> tuple[int, str]:
    """(page count, extracted text) of a PDF; (0, "") when pypdf cannot read it (encrypted, damaged)."""
    cached = _pdf_info.get(sha256)
    if cached is not None:
        return cached
    try:
        from pypdf import PdfReader

        reader = PdfReader(io.BytesIO(data))
        pages = len(reader.pages)
        text = "\n\n".join((page.extract_text() or "").strip() for page in reader.pages).strip()
    except Exception as exc:  # any unreadable PDF is "no text", never a failed request
        logger.info("pdf text extraction failed for %s: %s", sha256[:12], type(exc).__name__)
        pages, text = 0, ""
    _pdf_info.put(sha256, (pages, text))
    return pages, text


def image_size(sha256: str, data: bytes) -> tuple[int, int] | None:
    """(width, height) read from a PNG, GIF, JPEG or WebP header; None when the header says nothing."""
    cached = _image_dims.get(sha256)
    if cached is not None:
        return cached
    dims = _parse_dims(data)
    if dims is not None:
        _image_dims.put(sha256, dims)
    return dims


def _parse_dims(data: bytes) -> tuple[int, int] | None:  # noqa: C901 - one branch per format
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n":
            return struct.unpack(">II", data[16:24])
        if data[:6] in (b"GIF87a", b"GIF89a"):
            return struct.unpack("<HH", data[6:10])
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            chunk = data[12:16]
            if chunk == b"VP8X":
                width = int.from_bytes(data[24:27], "little") + 1
                height = int.from_bytes(data[27:30], "little") + 1
                return width, height
            if chunk == b"VP8L":
                bits = int.from_bytes(data[21:25], "little")
                return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
            if chunk == b"VP8 ":
                width, height = struct.unpack("<HH", data[26:30])
                return width & 0x3FFF, height & 0x3FFF
        if data[:2] == b"\xff\xd8":
            index = 2
            while index + 9 < len(data):
                if data[index] != 0xFF:
                    index += 1
                    continue
                marker = data[index + 1]
                length = struct.unpack(">H", data[index + 2 : index + 4])[0]
                if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
                    height, width = struct.unpack(">HH", data[index + 5 : index + 9])
                    return width, height
                index += 2 + length
    except struct.error:
        return None
    return None


def decoded_text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


# --- what each file becomes ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """A provider's documented limits for files sent natively (0: none we enforce)."""

    request_bytes: int = 0  # all native files of one request, as base64 (what goes over the wire)
    image_bytes: int = 0  # one image, as base64
    pdf_pages: int = 0  # one PDF
    pdf_bytes: int = 0  # one PDF, raw
    image_types: tuple[str, ...] = IMAGE_TYPES  # the image types the provider takes


MB = 1024 * 1024
LIMITS = {
    # Anthropic: a request is at most 32 MB; an image at most 5 MB (base64); a PDF at most 100 pages.
    "anthropic": Limits(request_bytes=32 * MB, image_bytes=5 * MB, pdf_pages=100),
    # OpenAI: files of one request at most 50 MB together.
    "openai": Limits(request_bytes=50 * MB),
    # Gemini: inline data up to 100 MB per request, a PDF inline up to 50 MB, 1,000 pages per document. Above the
    # inline limit the Gemini adapter uploads through the Files API instead (no refusal).
    # Gemini takes PNG, JPEG, WebP, HEIC and HEIF images: no GIF.
    "gemini": Limits(
        request_bytes=100 * MB,
        pdf_bytes=50 * MB,
        pdf_pages=1000,
        image_types=("image/png", "image/jpeg", "image/webp"),
    ),
    "openai_compatible": Limits(),
    "vertex_agent": Limits(),
}


@dataclass
class Prepared:
    """One file block as one request sends it."""

    block: dict
    form: str  # native | text | placeholder
    data: bytes = b""  # native: the bytes
    text: str = ""  # text: the document's text framed with its name; placeholder: the line
    pages: int = 0  # a PDF's page count, when read
    note: str = ""  # why it is not native, in plain words
    uri: str = ""  # native, Gemini: the Files API URI it was uploaded to (above the inline limit)

    @property
    def media_type(self) -> str:
        return str(self.block.get("media_type", ""))

    @property
    def name(self) -> str:
        return str(self.block.get("name", "file"))

    @property
    def kind(self) -> str:
        return kind_of(self.media_type)

    def b64(self) -> str:
        return base64.b64encode(self.data).decode()

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.b64()}"

    def as_text(self) -> str:
        """The text any provider can take for this file: the document's text or the placeholder line."""
        return self.text


def _document_text(block: dict, text: str, pages: int, note: str) -> str:
    cut = ""
    if len(text) > MAX_TEXT_CHARS:
        text, cut = text[:MAX_TEXT_CHARS], f" (cut at {MAX_TEXT_CHARS:,} characters)"
    pages_said = f", {pages} page{'s' if pages != 1 else ''}" if pages else ""
    head = f'[file "{block.get("name", "file")}" ({block.get("media_type", "?")}{pages_said}){cut}'
    head += f": {note}]" if note else "]"
    return f'{head}\n{text}\n[end of file "{block.get("name", "file")}"]'


@dataclass(frozen=True)
class FilesSupport:
    """What files become for one model (the catalogue's `images` / `documents`), for the chat to say before
    sending (`notice`) and for adapters to decide (`form`)."""

    provider: str
    model: str
    images: bool
    documents: bool
    workspace: bool = False  # a CLI runtime: files are written into its working directory

    def form(self, media_type: str) -> str:
        """ "native", "workspace", "text" or "placeholder" for a file of `media_type` (within the limits)."""
        if self.workspace:
            return "workspace"
        kind = kind_of(media_type)
        if kind == "image":
            accepted = media_type in LIMITS.get(self.provider, Limits()).image_types
            return "native" if self.images and accepted else "placeholder"
        if kind in ("pdf", "text"):
            return "native" if self.documents else "text"
        return "placeholder"

    def describe(self, files: list[dict]) -> list[dict]:
        """Per file ({name, media_type, size}): the same keys plus `form` and a plain-words `sent_as`."""
        words = {
            "native": "as the file itself",
            "workspace": "written into the agent's working directory and named in its prompt",
            "text": "as its extracted text (this model does not take documents)",
            "placeholder": "as a line naming it: this model does not take images",
        }
        out = []
        for file in files:
            form = self.form(str(file.get("media_type", "")))
            sent_as = words[form]
            kind = kind_of(str(file.get("media_type", "")))
            if form == "placeholder" and kind != "image":
                sent_as = "as a line naming it: this file type cannot be sent to a model"
            elif form == "placeholder" and self.images:
                sent_as = f"as a line naming it: this provider does not take {file.get('media_type')} images"
            out.append({**file, "form": form, "sent_as": sent_as})
        return out

    def notice(self, files: list[dict]) -> str:
        """One sentence for the composer when some file will not go as itself, else ""."""
        changed = [f for f in self.describe(files) if f["form"] in ("text", "placeholder")]
        if not changed:
            return ""
        said = "; ".join(f"{f['name']} {f['sent_as']}" for f in changed)
        return f"Not every file goes to {self.model} as itself: {said}."


def files_support(provider: str, model: str) -> FilesSupport:
    """What files will become for `model` on `provider` (providers/README.md#files)."""
    caps = capabilities(provider, model)
    return FilesSupport(
        provider=provider,
        model=model,
        images=caps.images,
        documents=caps.documents,
        workspace=provider in WORKSPACE_RUNTIMES,
    )


# Set while a request is sent again after the provider refused it with files of earlier turns (ChatUnifier): those
# files go as their text or a placeholder, so one file the provider will not take cannot block the conversation.
_earlier_as_text: contextvars.ContextVar[str] = contextvars.ContextVar("earlier_files_as_text", default="")


@contextmanager
def earlier_files_as_text(provider: str) -> Iterator[None]:
    token = _earlier_as_text.set(f"sent as text: {PROVIDER_NAMES.get(provider, provider)} refused the request with it")
    try:
        yield
    finally:
        _earlier_as_text.reset(token)


def has_earlier_files(messages: list[dict]) -> bool:
    """Whether a user message before the one being answered holds a file."""
    start = current_turn_start(messages)
    return any(
        b.get("type") == "file" for m in messages[:start] if m.get("role") == "user" for b in m.get("blocks", [])
    )


def current_turn_start(messages: list[dict]) -> int:
    """Index of the user message being answered: the last user message that is more than tool results."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user":
            return index
    return len(messages)


@dataclass
class FilePlan:
    """Every file block of one request, decided once: `plan[block]` is its `Prepared`.

    Built by an adapter from the request's messages; raises FileRefused for a file of the message being answered
    that the provider's documented limits refuse. Reads each file's bytes once per request."""

    provider: str
    model: str
    messages: list[dict]
    limits: Limits | None = None
    prepared: dict[int, Prepared] = field(default_factory=dict)
    images: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        support = files_support(self.provider, self.model)
        self.images = support.images  # the model takes images (also said of the older `image` blocks)
        limits = self.limits if self.limits is not None else LIMITS.get(self.provider, Limits())
        start = current_turn_start(self.messages)
        entries: list[tuple[bool, Prepared]] = []
        for index, message in enumerate(self.messages):
            if message.get("role") != "user":
                continue
            for block in message.get("blocks", []):
                if block.get("type") != "file":
                    continue
                prepared = self._prepare(block, support)
                entries.append((index >= start, prepared))
                self.prepared[id(block)] = prepared
        self._apply_limits(entries, limits)
        why = _earlier_as_text.get()
        if why:
            for current, prepared in entries:
                if not current and self[prepared.block].form == "native":
                    self._degrade(prepared, why)

    def __getitem__(self, block: dict) -> Prepared:
        return self.prepared[id(block)]

    def files(self) -> list[Prepared]:
        return list(self.prepared.values())

    def _prepare(self, block: dict, support: FilesSupport) -> Prepared:
        kind = kind_of(str(block.get("media_type", "")))
        try:
            data = read_file_bytes(str(block.get("sha256", "")))
        except FileUnavailable:
            return Prepared(block, "placeholder", text=f"[file {describe(block)} is no longer stored: not sent]")
        pages = 0
        if kind == "pdf":
            pages, _ = pdf_info(str(block["sha256"]), data)
        # Native when the model takes the kind; a type or size the provider refuses is _apply_limits' to decide.
        if (kind == "image" and support.images) or (kind in ("pdf", "text") and support.documents):
            return Prepared(block, "native", data=data, pages=pages)
        if kind == "image":
            return Prepared(
                block,
                "placeholder",
                text=f"[image {describe(block)} not sent: {self.model} takes text only]",
                note=f"{self.model} takes text only",
            )
        if kind in ("pdf", "text"):
            return self._as_text(block, data, pages, note=f"{self.model} does not take documents; its text")
        return Prepared(block, "placeholder", text=f"[file {describe(block)} not sent: this type cannot be sent]")

    def _as_text(self, block: dict, data: bytes, pages: int, *, note: str) -> Prepared:
        if kind_of(str(block.get("media_type", ""))) == "pdf":
            pages, text = pdf_info(str(block["sha256"]), data)
            if not text:
                line = f"[file {describe(block)}: {note.split(';')[0]} and no text could be read from it]"
                return Prepared(block, "placeholder", text=line, pages=pages, note=note)
        else:
            text = decoded_text(data)
        return Prepared(block, "text", text=_document_text(block, text, pages, note), pages=pages, note=note)

    def _degrade(self, prepared: Prepared, why: str) -> None:
        """An earlier turn's file the limits keep out: its text, else a placeholder (never a refusal)."""
        if prepared.kind in ("pdf", "text"):
            degraded = self._as_text(prepared.block, prepared.data, prepared.pages, note=why)
        else:
            degraded = Prepared(prepared.block, "placeholder", text=f"[image {describe(prepared.block)}: {why}]")
        self.prepared[id(prepared.block)] = degraded

    def _apply_limits(self, entries: list[tuple[bool, Prepared]], limits: Limits) -> None:
        where = PROVIDER_NAMES.get(self.provider, self.provider)
        for current, prepared in entries:
            problem = ""
            encoded = (len(prepared.data) + 2) // 3 * 4
            if prepared.form != "native":
                continue
            if prepared.kind == "image" and prepared.media_type not in limits.image_types:
                problem = f"{where} does not take {prepared.media_type} images"
            elif prepared.kind == "image" and limits.image_bytes and encoded > limits.image_bytes:
                problem = f"{where} takes images up to {human_size(limits.image_bytes)} (base64)"
            elif prepared.kind == "pdf" and limits.pdf_pages and prepared.pages > limits.pdf_pages:
                problem = f"it has {prepared.pages} pages and {where} takes at most {limits.pdf_pages} per PDF"
            elif prepared.kind == "pdf" and limits.pdf_bytes and len(prepared.data) > limits.pdf_bytes:
                problem = f"{where} takes PDFs up to {human_size(limits.pdf_bytes)}"
            if not problem:
                continue
            if current:
                raise FileRefused(f"{prepared.name} was not sent: {problem}.", provider=self.provider, status=None)
            self._degrade(prepared, f"not sent as a file, {problem}")
        if not limits.request_bytes or self.provider == "gemini":
            return  # Gemini: the adapter moves what is over the inline limit to its Files API

        def total() -> int:
            return sum((len(p.data) + 2) // 3 * 4 for p in self.prepared.values() if p.form == "native")

        # Oldest earlier-turn files go as text first, until the request fits; the current message's files last.
        for current, prepared in entries:
            if total() <= limits.request_bytes:
                return
            if not current and self[prepared.block].form == "native":
                self._degrade(
                    prepared, f"sent as text to keep the request within {where}'s {human_size(limits.request_bytes)}"
                )
        if total() > limits.request_bytes:
            names = ", ".join(p.name for current, p in entries if current and self[p.block].form == "native")
            raise FileRefused(
                f"{names} {'was' if ',' not in names else 'were'} not sent: {where} takes at most "
                f"{human_size(limits.request_bytes)} of files in one request.",
                provider=self.provider,
            )


PROVIDER_NAMES = {
    "openai": "OpenAI",
    "anthropic": "Anthropic",
    "gemini": "Gemini",
    "openai_compatible": "the OpenAI-compatible server",
    "vertex_agent": "Vertex",
}


def attachments_of(messages: list[dict]) -> list[dict]:
    """{name, media_type, size} of every file a request carries (never the bytes), for "what this answer was
    sent"."""
    return [
        {"name": b.get("name", ""), "media_type": b.get("media_type", ""), "size": int(b.get("size") or 0)}
        for m in messages
        for b in m.get("blocks", [])
        if b.get("type") == "file"
    ]


# --- counting: each provider's documented rule for images and PDF pages -------------------------------------------

# A US-letter page as each provider renders it for a PDF's page image.
LETTER = (612 * 2, 792 * 2)


def image_tokens(provider: str, width: int, height: int) -> int:
    """Input tokens of one image by the provider's documented rule."""
    if provider == "openai":
        # Images guide (detail high/auto): fit in 2048 x 2048, then the shortest side to 768; 170 per 512 px tile
        # plus 85.
        scale = min(1.0, 2048 / max(width, height))
        w, h = width * scale, height * scale
        scale = min(1.0, 768 / min(w, h))
        w, h = w * scale, h * scale
        return 85 + 170 * (-(-int(w) // 512)) * (-(-int(h) // 512))
    if provider == "gemini":
        # Token counting guide: 258 when both sides are at most 384 px, else 258 per tile, the tile side being the
        # smaller side / 1.5 kept between 256 and 768.
        if width <= 384 and height <= 384:
            return 258
        unit = max(256, min(768, int(min(width, height) / 1.5)))
        return 258 * (-(-width // unit)) * (-(-height // unit))
    # Anthropic's vision guide (also our estimate for servers that document none): width x height / 750, after
    # scaling the long side to at most 1568 px and the area to at most 1.15 megapixels.
    scale = min(1.0, 1568 / max(width, height), (1_150_000 / max(width * height, 1)) ** 0.5)
    return max(1, int(width * scale) * int(height * scale) // 750)


def pdf_page_tokens(provider: str) -> int:
    """Tokens of one PDF page's image, beside its text (Gemini: the documented flat cost of a page, text included)."""
    if provider == "gemini":
        return 258  # document understanding guide: each page is 258 tokens
    return image_tokens(provider, *LETTER)  # OpenAI and Anthropic send each page's text and its image


def file_tokens(block: dict, *, provider: str, model: str, chars_per_token: int = 4) -> int:
    """Input tokens one attached file adds to a request to `model`, by what it becomes there (FilePlan's rules).
    The bytes are read only when neither the block nor the caches by hash can answer (every step estimates)."""
    support = files_support(provider, model)
    kind = kind_of(str(block.get("media_type", "")))
    sha256 = str(block.get("sha256", ""))
    size = int(block.get("size") or 0)
    if support.workspace or (kind == "image" and not support.images) or kind == "other":
        return 30  # a line naming it (and, for a CLI, where it is: the agent reads it with its own tools)
    if kind == "text":
        return min(size, MAX_TEXT_CHARS) // chars_per_token + 30
    if kind == "image":
        dims = _image_dims.get(sha256)
        if dims is None:
            try:
                dims = image_size(sha256, read_file_bytes(sha256))
            except FileUnavailable:
                return 20  # the line saying it is no longer stored
        return image_tokens(provider, *dims) if dims else 1000
    info = _pdf_info.get(sha256)
    if info is None:
        try:
            info = pdf_info(sha256, read_file_bytes(sha256))
        except FileUnavailable:
            return 20
    pages, text = info
    text_tokens = min(len(text), MAX_TEXT_CHARS) // chars_per_token
    if not support.documents:
        return text_tokens + 30
    if provider == "gemini":
        return pdf_page_tokens(provider) * max(pages, 1)
    return text_tokens + pdf_page_tokens(provider) * max(pages, 1)
