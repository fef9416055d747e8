"""A question's image: read, sniffed and turned into a URL a chat API takes (see "Images" in
:mod:`engine.tasks.files`)."""

from __future__ import annotations

import base64
import binascii
import io
import mimetypes
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from engine.tasks import DATA_URL_RE, DatasetError, type_name


class Row(Protocol):
    """What reading an image needs of its row (:class:`engine.tasks.row.Row`): the folder relative
    paths are read from, and the row's way of naming itself in an error."""

    base: Path | None

    def error(self, msg: str) -> DatasetError: ...


_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
)
_SNIFFED = frozenset(m for _, m in _SIGNATURES) | {"image/webp"}


def _sniff(data: bytes) -> str | None:
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((mime for sig, mime in _SIGNATURES if data.startswith(sig)), None)


def image_mime(data: bytes, name: str = "") -> str | None:
    """An image's MIME type: sniffed from its first bytes (PNG, JPEG, GIF, WebP, BMP), else from an
    ``image/*`` extension of ``name`` that is not one of those (a ``.png`` that is not a PNG is not
    taken on its word); None when it is neither."""
    sniffed = _sniff(data)
    if sniffed:
        return sniffed
    guessed = mimetypes.guess_type(name)[0] if name else None
    if guessed and guessed.startswith("image/") and guessed not in _SNIFFED:
        return guessed
    return None


def _data_url(r: Row, key: str, data: bytes, name: str, shown: str) -> str:
    if not data:
        raise r.error(f"image {shown} (field {key!r}) is empty")
    mime = image_mime(data, name)
    if mime is None:
        raise r.error(
            f"image {shown} (field {key!r}) is not an image type we know "
            f"(PNG, JPEG, GIF, WebP, BMP by content, or an image/* file extension)"
        )
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _read_image_file(r: Row, key: str, value: str) -> str:
    path = Path(value).expanduser()
    if not path.is_absolute():
        if r.base is None:
            raise r.error(
                f"image path {value!r} (field {key!r}) is relative and this data set has no folder "
                f"to read it from; give an absolute path or a URL"
            )
        path = r.base / path
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise r.error(
            f"image file {value!r} (field {key!r}): cannot read {path}: {exc.strerror or type(exc).__name__}"
        ) from None
    return _data_url(r, key, data, path.name, f"file {value!r}")


def image_url(r: Row, key: str, value: Any) -> str | None:
    """The image of field ``key`` as an http(s) or data URL (module docstring, "Images")."""
    if isinstance(value, str):
        s = value.strip()
        if not s:
            return None
        if s[:5].lower() == "data:":
            m = DATA_URL_RE.fullmatch(s)
            if not m:
                raise r.error(f"field {key!r} is a data URL that is not data:image/<type>;base64,...")
            try:
                base64.b64decode(m.group(2), validate=True)
            except (binascii.Error, ValueError):
                raise r.error(f"field {key!r} is a data URL whose base64 does not decode") from None
            return s
        if s[:8].lower().startswith(("http://", "https://")):
            return s
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", s):
            raise r.error(
                f"field {key!r}: unsupported URL {s[:80]!r}; give an http(s) URL, a data:image URL or a file path"
            )
        return _read_image_file(r, key, s)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _data_url(r, key, bytes(value), "", "bytes")
    if isinstance(value, Mapping):  # a Parquet image struct / Hugging Face Image column: {bytes, path}
        data, path = value.get("bytes"), value.get("path")
        if data:
            return _data_url(r, key, bytes(data), str(path or ""), f"bytes of {path!r}" if path else "bytes")
        if isinstance(path, str) and path.strip():
            return image_url(r, key, path)
        raise r.error(f"field {key!r} is an object without image 'bytes' or a 'path'")
    if hasattr(value, "save") and hasattr(value, "size") and hasattr(value, "mode"):  # a PIL image
        buf = io.BytesIO()
        try:
            value.save(buf, format=getattr(value, "format", None) or "PNG")
        except Exception as exc:  # noqa: BLE001 - any encoder failure is this row's problem
            raise r.error(f"field {key!r}: cannot encode the image: {type(exc).__name__}: {exc}") from None
        return _data_url(r, key, buf.getvalue(), "", "PIL image")
    raise r.error(f"field {key!r} must be a file path, an http(s) URL or a data:image URL, got {type_name(value)}")
