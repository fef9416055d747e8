"""Hub ids are downloaded by the replica before its engine starts (``model_store.hub_snapshot``).

Against a fake hub (``HfApi.model_info`` and ``snapshot_download`` replaced by :class:`FakeHub`,
which writes the Hugging Face cache layout itself) and with every socket refused: the files a load
reads are chosen, a download runs once per node under a lock, it logs progress lines (no bars), the
engines get the local snapshot folder of the requested ``@revision``, a complete cache needs no
network, and a failure is one line naming the model.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import socket
import sys
import threading
import time
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from backends import model_store

MAIN, V1 = "a" * 40, "b" * 40
SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
# what a load reads: configs, tokenizer, the safetensors index and the shards it names
WANTED = {
    "config.json",
    "generation_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "model.safetensors.index.json",
    *SHARDS,
}
# a repository laid out like meta-llama's: a second copy of the weights in the same format, the
# other format, the original checkpoint in a sub-folder, and files no load reads
LISTING = sorted(
    WANTED
    | {
        "consolidated.safetensors",
        "pytorch_model-00001-of-00001.bin",
        "pytorch_model.bin.index.json",
        "training_args.bin",
        "original/consolidated.00.pth",
        "original/params.json",
        "original/tokenizer.model",
        "README.md",
        "LICENSE",
        ".gitattributes",
        "USE_POLICY.md",
    }
)


def repo_files(tag: str) -> dict[str, bytes]:
    files = {f: f"{tag} {f}".encode() for f in LISTING}
    files["config.json"] = json.dumps({"model_type": "llama", "tag": tag}).encode()
    files["model.safetensors.index.json"] = json.dumps({"weight_map": {"a": SHARDS[0], "b": SHARDS[1]}}).encode()
    for f in (*SHARDS, "consolidated.safetensors"):
        files[f] = (tag.encode() * 20_000)[:40_000]  # 40 kB each: written in chunks, so progress shows
    return files


class FakeHub:
    """A hub with one repository, ``org/llama``, at two commits (``main`` and the tag ``v1``)."""

    def __init__(self, cache: Path, delay: float = 0.0):
        self.cache, self.delay = cache, delay
        self.commits = {MAIN: repo_files("main"), V1: repo_files("v1")}
        self.refs = {"main": MAIN, "v1": V1}
        self.infos: list[tuple[str, str | None]] = []
        self.downloads: list[dict] = []
        self.gate: threading.Event | None = None  # weights wait for it (at most 10 s) when set
        self.error: Exception | None = None

    def model_info(self, api, repo_id, *, revision=None, files_metadata=False, **_):
        self.infos.append((repo_id, revision))
        if self.error is not None:
            raise self.error
        assert files_metadata, "sizes are asked for"
        commit = self.refs.get(revision or "main", revision)
        return SimpleNamespace(
            sha=commit, siblings=[SimpleNamespace(rfilename=f, size=len(c)) for f, c in self.commits[commit].items()]
        )

    def snapshot_download(self, repo_id, *, revision=None, allow_patterns=None, cache_dir=None, **_):
        from huggingface_hub.utils import are_progress_bars_disabled

        files = self.commits[revision]  # always a commit: the one model_info named
        chosen = sorted(f for f in files if any(fnmatch.fnmatch(f, p) for p in allow_patterns))
        self.downloads.append(
            {
                "revision": revision,
                "files": chosen,
                "bars_off": are_progress_bars_disabled(),
                "cache_dir": str(cache_dir),
            }
        )
        if self.gate is not None and any(f.endswith(".safetensors") for f in chosen):
            self.gate.wait(10)
        storage = Path(cache_dir) / ("models--" + repo_id.replace("/", "--"))
        snap = storage / "snapshots" / revision
        (storage / "blobs").mkdir(parents=True, exist_ok=True)
        snap.mkdir(parents=True, exist_ok=True)
        for f in chosen:
            if (snap / f).exists():  # as huggingface_hub: a file of this commit already cached
                continue
            blob = storage / "blobs" / hashlib.sha256(files[f]).hexdigest()
            part = blob.with_name(blob.name + ".incomplete")
            with open(part, "wb") as out:
                for i in range(0, len(files[f]), 5_000):
                    out.write(files[f][i : i + 5_000])
                    out.flush()
                    time.sleep(self.delay)
            part.rename(blob)
            (snap / f).unlink(missing_ok=True)
            (snap / f).symlink_to(blob)
        return str(snap)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """The fake hub behind huggingface_hub's functions, an empty cache, online, and no network."""
    import huggingface_hub
    from huggingface_hub import constants

    def refuse(*a, **k):
        raise OSError("the test refuses network access")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    fake = FakeHub(tmp_path / "hub")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(fake.cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda api, *a, **k: fake.model_info(api, *a, **k))
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake.snapshot_download)
    return fake


class Lines(list):
    """Log lines kept; ``waiting`` is set once one says a caller waits for another's download."""

    def __init__(self):
        super().__init__()
        self.waiting = threading.Event()


@pytest.fixture
def lines():
    """The download logger's lines (attached to it directly: the CLI's own setup stops propagation)."""
    got = Lines()

    class Keep(logging.Handler):
        def emit(self, record):
            got.append(record.getMessage())
            if "waiting" in got[-1]:
                got.waiting.set()

    lg = logging.getLogger("backends.model_store.download")
    handler, level = Keep(), lg.level
    lg.addHandler(handler)
    lg.setLevel(logging.INFO)
    yield got
    lg.removeHandler(handler)
    lg.setLevel(level)


def snapshot(hub: FakeHub, commit: str) -> Path:
    return hub.cache / "models--org--llama" / "snapshots" / commit


def test_the_files_a_load_reads_are_chosen():
    """Configs, tokenizer and one weights format (safetensors first, only the shards its index
    names); never the other format, a sub-folder (``original/``), READMEs or training state."""
    weight_map = {"a": SHARDS[0], "b": SHARDS[1]}
    assert set(model_store.config_files(LISTING) + model_store.weight_files(LISTING, weight_map)) == WANTED
    # without an index every safetensors file at the top is a weight
    assert model_store.weight_files(LISTING) == sorted([*SHARDS, "consolidated.safetensors"])
    bins = [
        "config.json",
        "tokenizer.json",
        "pytorch_model-00001-of-00002.bin",
        "pytorch_model-00002-of-00002.bin",
        "pytorch_model.bin.index.json",
        "training_args.bin",
        "model.safetensors.index.json",
        "merges.txt",
        "vocab.json",
        "LICENSE.txt",
        "tokenizer.model.v3",
        "chat_template.jinja",
        "model.gguf",
    ]
    assert model_store.weights_format(bins) == (".bin", "pytorch_model.bin.index.json")
    assert model_store.config_files(bins) == [
        "chat_template.jinja",
        "config.json",
        "merges.txt",
        "pytorch_model.bin.index.json",
        "tokenizer.json",
        "tokenizer.model.v3",
        "vocab.json",
    ]
    assert model_store.weight_files(bins) == ["pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"]
    assert model_store.weights_format(["config.json", "model.gguf", "original/model.safetensors"]) is None


@pytest.fixture
def bars_on():
    """huggingface_hub's progress bars on for the test (an earlier test in the same process may have
    turned them off: transformers' own switch does), as they were afterwards."""
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    was_off = are_progress_bars_disabled()
    enable_progress_bars()
    yield
    if was_off:
        disable_progress_bars()


def test_a_hub_id_downloads_what_a_load_reads_once_with_progress_lines(hub, lines, monkeypatch, bars_on):
    """One listing request, the small files then the weights, at the commit ``main`` names; the
    cache's ``refs/main`` is written; a line at the start (files, size), lines while it runs, one
    at the end (time); huggingface_hub's own bars are off meanwhile and restored after."""
    from huggingface_hub.utils import are_progress_bars_disabled

    monkeypatch.setattr(model_store, "HUB_LOG_EVERY_S", 0.02)
    hub.delay = 0.01
    assert not are_progress_bars_disabled()
    folder = model_store.resolve_model("org/llama")
    assert folder == snapshot(hub, MAIN) and {p.name for p in folder.iterdir()} == WANTED
    assert hub.infos == [("org/llama", None)]
    assert [d["revision"] for d in hub.downloads] == [MAIN, MAIN]
    assert set(hub.downloads[0]["files"]) == WANTED - set(SHARDS)  # the index first: it names the shards
    assert set(hub.downloads[1]["files"]) == WANTED
    assert all(d["bars_off"] for d in hub.downloads) and not are_progress_bars_disabled()
    assert (hub.cache / "models--org--llama" / "refs" / "main").read_text() == MAIN
    total = sum(len(hub.commits[MAIN][f]) for f in WANTED)
    assert lines[0] == (
        f"org/llama: downloading 8 files, {model_store._size(total)} from the Hugging Face hub "
        f"(commit {MAIN[:12]}) into {hub.cache}"
    )
    progress = [ln for ln in lines[1:-1] if " downloaded, " in ln]
    assert progress and all(ln.startswith("org/llama: ") and "%) downloaded, " in ln for ln in progress), lines
    percents = [int(ln.split("(")[1].split("%")[0]) for ln in progress]
    assert percents == sorted(percents) and percents[-1] > 0
    assert lines[-1].startswith(f"org/llama: downloaded 8 files, {model_store._size(total)} in ") and lines[
        -1
    ].endswith(" s")
    # a second replica later: the cache holds it, nothing is asked of the hub
    assert model_store.resolve_model("org/llama") == folder and len(hub.infos) == 1 and len(hub.downloads) == 2


def test_two_replicas_on_a_node_download_once(hub, lines):
    """The second caller waits on the lock while the first downloads, then finds the snapshot."""
    hub.gate = lines.waiting  # the first holds the lock until the second says it waits
    got: list[Path] = []
    barrier = threading.Barrier(2)

    def replica():
        barrier.wait()
        got.append(model_store.hub_snapshot("org/llama"))

    threads = [threading.Thread(target=replica) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert got == [snapshot(hub, MAIN)] * 2
    assert len(hub.infos) == 1 and len(hub.downloads) == 2, (hub.infos, lines)  # one listing, small files + weights
    assert lines.waiting.is_set()
    assert any(ln == f"org/llama: found complete in the Hugging Face cache: {snapshot(hub, MAIN)}" for ln in lines)


def test_a_revision_is_downloaded_as_a_local_folder(hub, monkeypatch):
    """``org/llama@v1``: the hub is asked for v1, its commit is fetched and ``refs/v1`` names it;
    the commit is what the runs row records (the next test: the transformers backend and vLLM get
    that snapshot folder, never the hub id)."""
    folder = model_store.resolve_model("org/llama@v1")
    assert folder == snapshot(hub, V1) and json.loads((folder / "config.json").read_text())["tag"] == "v1"
    assert hub.infos == [("org/llama", "v1")] and {d["revision"] for d in hub.downloads} == {V1}
    assert (hub.cache / "models--org--llama" / "refs" / "v1").read_text() == V1
    assert not (hub.cache / "models--org--llama" / "refs" / "main").exists()
    assert model_store.model_revision("org/llama@v1", folder) == V1
    assert model_store.model_revision("smollm2", "/some/folder") is None


@pytest.mark.slow  # imports transformers and torch (seconds); the folder itself is checked above
def test_both_engines_get_a_revisions_snapshot_folder_never_the_hub_id(hub, monkeypatch):
    folder = model_store.resolve_model("org/llama@v1")

    class Loaded(Exception):
        pass

    def capture(path, *a, **k):
        raise Loaded(str(path))

    import transformers

    from backends.transformers_backend import TransformersBackend

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", capture)
    with pytest.raises(Loaded) as got:
        TransformersBackend("org/llama@v1", device="cpu")
    assert got.value.args == (str(folder),)

    # vLLM's modules faked: the engine arguments VLLMBackend builds are captured
    from backends import vllm_backend as backend_vllm

    class AsyncLLM:
        @staticmethod
        def from_engine_args(args):
            raise Loaded(args)

    fakes = {
        "vllm": types.ModuleType("vllm"),
        "vllm.platforms": types.ModuleType("vllm.platforms"),
        "vllm.v1": types.ModuleType("vllm.v1"),
        "vllm.v1.engine": types.ModuleType("vllm.v1.engine"),
        "vllm.v1.engine.async_llm": types.ModuleType("vllm.v1.engine.async_llm"),
    }
    fakes["vllm"].AsyncEngineArgs = dict
    fakes["vllm.platforms"].current_platform = SimpleNamespace(is_cpu=lambda: False)
    fakes["vllm.v1.engine.async_llm"].AsyncLLM = AsyncLLM
    for name, module in fakes.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(backend_vllm, "quiet_engine_processes", lambda: None)
    with pytest.raises(Loaded) as got:
        backend_vllm.VLLMBackend("org/llama@v1")
    args = got.value.args[0]
    assert args["model"] == str(folder) and "revision" not in args and len(hub.infos) == 1


@pytest.mark.parametrize("offline", [True, False])
def test_a_complete_cache_needs_no_network(hub, offline, monkeypatch):
    """A snapshot already complete in the cache (as ``hf download`` leaves it) is used as it is,
    online or with HF_HUB_OFFLINE: no request at all (sockets are refused here anyway); the
    revision is looked up through the cache's refs. Offline, an incomplete one is one line."""
    from huggingface_hub import constants

    hub.snapshot_download("org/llama", revision=V1, allow_patterns=sorted(WANTED), cache_dir=hub.cache)
    (hub.cache / "models--org--llama" / "refs").mkdir()
    (hub.cache / "models--org--llama" / "refs" / "v1").write_text(V1)
    hub.downloads.clear()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
    hub.error = AssertionError("the hub was asked")
    assert model_store.resolve_model("org/llama@v1") == snapshot(hub, V1)
    assert model_store.resolve_model(f"org/llama@{V1}") == snapshot(hub, V1)
    assert hub.infos == [] and hub.downloads == []
    if offline:
        (snapshot(hub, V1) / SHARDS[1]).unlink()  # a download cut short
        with pytest.raises(model_store.ModelNotFound) as err:
            model_store.resolve_model("org/llama@v1")
        msg = str(err.value)
        assert msg.startswith("--model org/llama@v1: HF_HUB_OFFLINE is set") and "\n" not in msg
        assert hub.infos == []


@pytest.mark.slow  # the replica's load path imports transformers and torch (seconds)
def test_a_failed_download_is_the_replicas_load_error_in_one_line(hub, caplog):
    """The hub's error, however many lines, is one line naming the model and the reason: the
    backend raises it, and the replica reports it as its load error; its traceback goes to the
    log (a bug in the download must not pass for a hub failure unseen)."""
    from actors.replica_actor import make_backend

    hub.error = OSError(
        "401 Client Error: Unauthorized\nAccess to model org/llama is restricted.\n  Cannot access gated repo"
    )
    with pytest.raises(model_store.ModelNotFound) as err:
        make_backend("transformers", "org/llama", {"device": "cpu"})
    msg = str(err.value)
    assert msg == (
        "--model org/llama: downloading it from the Hugging Face hub failed: OSError: 401 Client Error: "
        "Unauthorized Access to model org/llama is restricted. Cannot access gated repo"
    )
    assert hub.downloads == [] and not (hub.cache / "models--org--llama" / "snapshots").exists()
    (record,) = [r for r in caplog.records if "the download failed" in r.getMessage()]
    assert record.levelname == "WARNING" and record.exc_info and record.exc_info[0] is OSError
