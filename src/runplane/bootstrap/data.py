"""What a handler is handed besides its parameters: its inputs, as paths with MLRun's reading
helpers, and the paths of the artifacts it logs."""

from __future__ import annotations

import os
import shutil

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class DataItem(str):
    """A run's input: its path (it is the path, as a string), with the reading helpers that
    handlers written for MLRun call (``local()``, ``get()``, ``as_df()``).

    Only local files (and volumes mounted into the run, V3IO's included) are read: other
    stores (``s3://``, ``store://``...) are refused with the store's name.
    """

    def __new__(cls, url: str, key: str = "") -> DataItem:
        item = super().__new__(cls, url)
        item.key = key or os.path.basename(url.rstrip("/"))
        return item

    key: str

    @property
    def url(self) -> str:
        return str(self)

    @property
    def kind(self) -> str:
        return "file"

    @property
    def suffix(self) -> str:
        return os.path.splitext(self.local())[1]

    def local(self) -> str:
        """The file's path on this machine."""
        url = str(self)
        scheme = url.split("://", 1)[0].lower() if "://" in url else ""
        if scheme == "file":
            return url[len("file://") :]
        if scheme:
            raise OutOfScope(
                f"the {scheme}:// data store",
                f"runplane reads local files and mounted volumes (input {self.key!r} is {url!r}); "
                "copy the data to a mounted volume (mount_pvc, mount_v3io) and pass its path",
            )
        return url

    def get(self, size: int | None = None, offset: int = 0, encoding: str | None = None) -> Any:
        with open(self.local(), "rb") as source:
            source.seek(offset)
            data = source.read() if size is None else source.read(size)
        return data.decode(encoding) if encoding else data

    def put(self, data: str | bytes, append: bool = False) -> None:
        mode = ("a" if append else "w") + ("b" if isinstance(data, bytes) else "")
        with open(self.local(), mode) as target:
            target.write(data)

    def open(self, mode: str = "r") -> Any:
        return open(self.local(), mode)

    def stat(self) -> os.stat_result:
        return os.stat(self.local())

    def listdir(self) -> list[str]:
        return sorted(os.listdir(self.local()))

    ls = listdir

    def download(self, target_path: str) -> None:
        shutil.copyfile(self.local(), target_path)

    def upload(self, src_path: str) -> None:
        shutil.copyfile(src_path, self.local())

    def delete(self) -> None:
        os.remove(self.local())

    def as_df(self, columns: list[str] | None = None, format: str = "", **kwargs: Any) -> Any:
        """The file as a pandas DataFrame (CSV, Parquet, JSON, by suffix or ``format``)."""
        import pandas

        path = self.local()
        kind = (format or os.path.splitext(path)[1].lstrip(".")).lower()
        if kind in ("parquet", "pq"):
            frame = pandas.read_parquet(path, columns=columns, **kwargs)
        elif kind in ("json", "jsonl"):
            frame = pandas.read_json(path, lines=kind == "jsonl", **kwargs)
        else:
            frame = pandas.read_csv(path, usecols=columns, **kwargs)
        return frame


class OutOfScope(Exception):
    """An MLRun feature runplane does not provide; the message names it and what to do."""

    def __init__(self, feature: str, advice: str) -> None:
        self.feature = feature
        super().__init__(f"{feature} is not part of runplane: {advice}")


class ArtifactPath(str):
    """Where a logged artifact was written (it is the path), with the names MLRun's artifact
    objects have (``key``, ``target_path``, ``uri``)."""

    def __new__(cls, path: str, key: str, kind: str = "artifact") -> ArtifactPath:
        item = super().__new__(cls, path)
        item.key = key
        item.kind = kind
        return item

    key: str
    kind: str

    @property
    def target_path(self) -> str:
        return str(self)

    uri = target_path

    def get_target_path(self) -> str:
        return str(self)
