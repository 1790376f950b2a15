"""The part of a run's context that keeps files with the run: artifacts, datasets, models."""

from __future__ import annotations

import json
import os
import shutil

from .data import ArtifactPath, OutOfScope

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _check_key(call: str, key: object) -> str:
    if not isinstance(key, str) or not key or "/" in key or key in (".", ".."):
        raise ValueError(f"{call}({key!r}): a key is a file name, without '/'")
    return key


def _size(path: str) -> int:
    if os.path.isdir(path):
        return sum(
            os.path.getsize(os.path.join(folder, name))
            for folder, _, files in os.walk(path)
            for name in files
        )
    return os.path.getsize(path)


class ArtifactLogging:
    """The artifact methods of :class:`~.context.Context`, MLRun's names and arguments. A file
    is written under the run's artifact path (a volume's directory where it is mounted), then
    recorded: in the run's event file, or, for an iteration's context, under its parent's."""

    artifact_path: str
    artifacts: list[dict[str, Any]]
    iteration: int
    _parent: ArtifactLogging | None

    def _emit(self, event: dict[str, Any]) -> None:
        raise NotImplementedError

    def _resolve(self, path: str) -> str:
        raise NotImplementedError

    def artifact_subpath(self, *subpaths: str) -> str:
        """A path under the run's artifact directory."""
        return os.path.join(self.artifact_path, *subpaths)

    def _artifact_target(
        self, key: str, suffix: str, artifact_path: str | None, target_path: str = ""
    ) -> str:
        if target_path and "://" not in target_path:
            return self._resolve(target_path)
        folder = self._resolve(artifact_path) if artifact_path else self.artifact_path
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, key + suffix)

    def _record_artifact(self, key: str, target: str, kind: str, **meta: Any) -> ArtifactPath:
        artifact = {"key": key, "path": target, "size": _size(target)}
        if self._parent is None:
            self.artifacts.append(artifact)
            self._emit({"type": "artifact", **artifact, "kind": kind, **meta})
        else:
            self._parent._record_artifact(f"{key}-{self.iteration}", target, kind, **meta)
        return ArtifactPath(target, key, kind)

    def log_artifact(
        self,
        item: Any,
        body: str | bytes | None = None,
        local_path: str | os.PathLike[str] | None = None,
        artifact_path: str | None = None,
        tag: str = "",
        viewer: str | None = None,
        target_path: str = "",
        src_path: str | None = None,
        upload: bool | None = None,
        labels: dict[str, str] | None = None,
        format: str | None = None,
        db_key: str | None = None,
        **kwargs: Any,
    ) -> ArtifactPath:
        """Keep a file with the run: written from ``body``, or copied from ``local_path`` (a
        file or a directory). With both, ``local_path`` names the file ``body`` is written to
        (its suffix is kept). Returns where it was written."""
        key = _check_key("log_artifact", getattr(item, "key", item))
        if not isinstance(item, str) and body is None:
            body = _artifact_body(item)
        source = src_path or (local_path if body is None else None)
        if body is None and source is None:
            raise ValueError(f"log_artifact({key!r}): give body or local_path")
        suffix = os.path.splitext(str(local_path or source or ""))[1]
        target = self._artifact_target(key, suffix, artifact_path, target_path)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        if body is not None:
            data = body.encode() if isinstance(body, str) else body
            with open(target, "wb") as written:
                written.write(data or b"")
        elif os.path.isdir(str(source)):
            if os.path.exists(target):
                shutil.rmtree(target)
            shutil.copytree(str(source), target)
        else:
            shutil.copyfile(str(source), target)
        return self._record_artifact(key, target, "artifact", labels=labels or {})

    def log_dataset(
        self,
        key: str,
        df: Any,
        tag: str = "",
        local_path: str | None = None,
        artifact_path: str | None = None,
        upload: bool | None = None,
        labels: dict[str, str] | None = None,
        format: str = "",
        preview: int | None = None,
        stats: bool | None = None,
        db_key: str | None = None,
        target_path: str = "",
        extra_data: dict[str, Any] | None = None,
        label_column: str | None = None,
        **kwargs: Any,
    ) -> ArtifactPath:
        """Keep a table with the run, as a file: CSV by default, or ``format`` ``parquet`` or
        ``json``. ``df`` is a pandas DataFrame (or anything ``pandas.DataFrame`` takes)."""
        _check_key("log_dataset", key)
        import pandas

        frame = df if isinstance(df, pandas.DataFrame) else pandas.DataFrame(df)
        kind = (format or os.path.splitext(local_path or "")[1].lstrip(".") or "csv").lower()
        if kind not in ("csv", "parquet", "pq", "json"):
            raise ValueError(f"log_dataset({key!r}): formats are csv, parquet and json")
        target = self._artifact_target(key, "." + kind, artifact_path, target_path)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        if kind == "csv":
            kwargs.setdefault("index", False)
            frame.to_csv(target, **kwargs)
        elif kind == "json":
            frame.to_json(target, **kwargs)
        else:
            frame.to_parquet(target, **kwargs)
        return self._record_artifact(
            key,
            target,
            "dataset",
            format=kind,
            columns=[str(column) for column in frame.columns],
            rows=len(frame),
            labels=labels or {},
            label_column=label_column,
        )

    def log_model(
        self,
        key: str,
        body: bytes | None = None,
        framework: str = "",
        tag: str = "",
        model_dir: str | None = None,
        model_file: str | None = None,
        algorithm: str | None = None,
        metrics: dict[str, Any] | None = None,
        parameters: dict[str, Any] | None = None,
        artifact_path: str | None = None,
        upload: bool = True,
        labels: dict[str, str] | None = None,
        inputs: Any = None,
        outputs: Any = None,
        feature_vector: str | None = None,
        feature_weights: list[Any] | None = None,
        training_set: Any = None,
        label_column: str | list[str] | None = None,
        extra_data: dict[str, Any] | None = None,
        db_key: str | None = None,
        **kwargs: Any,
    ) -> ArtifactPath:
        """Keep a model with the run: its file (``model_file``, or ``body`` written to it) in
        the folder ``<artifact path>/<key>/``, with ``model_spec.json`` holding its framework,
        algorithm, metrics, parameters and labels. Returns the model file's path."""
        _check_key("log_model", key)
        if feature_vector is not None:
            raise OutOfScope("the feature store (log_model feature_vector=)", "leave it out")
        if training_set is not None:
            raise OutOfScope(
                "model monitoring (log_model training_set=)",
                "leave it out; log the training set with log_dataset if you want it kept",
            )
        folder = self._artifact_target(key, "", artifact_path)
        os.makedirs(folder, exist_ok=True)
        if model_dir is not None and model_file is None and body is None:
            shutil.copytree(model_dir, folder, dirs_exist_ok=True)
            target = folder
        else:
            name = os.path.basename(model_file or f"{key}.pkl")
            target = os.path.join(folder, name)
            if body is not None:
                with open(target, "wb") as written:
                    written.write(body.encode() if isinstance(body, str) else body)
            elif model_file is not None:
                source = os.path.join(model_dir, model_file) if model_dir else model_file
                shutil.copyfile(source, target)
            else:
                raise ValueError(f"log_model({key!r}): give model_file, model_dir or body")
        spec = {
            "key": key,
            "framework": framework,
            "algorithm": algorithm,
            "model_file": os.path.basename(target),
            "metrics": metrics or {},
            "parameters": parameters or {},
            "labels": labels or {},
            "extra_data": {k: str(v) for k, v in (extra_data or {}).items()},
        }
        with open(os.path.join(folder, "model_spec.json"), "w", encoding="utf-8") as written:
            json.dump(spec, written, default=str, indent=2)
        return self._record_artifact(key, target, "model", framework=framework)

    def get_cached_artifact(self, key: str) -> dict[str, Any] | None:
        for artifact in self.artifacts:
            if artifact["key"] == key:
                return artifact
        return None


def _artifact_body(item: Any) -> bytes:
    """The content of an artifact object (an object with ``get_body()``, as MLRun's have)."""
    get_body = getattr(item, "get_body", None)
    if not callable(get_body):
        raise TypeError(
            f"log_artifact: {type(item).__name__} is not an artifact; give a key with body= "
            "or local_path="
        )
    body = get_body()
    return body.encode() if isinstance(body, str) else bytes(body)
