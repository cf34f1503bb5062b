"""A Hugging Face Hub-API-compatible HTTP server on 127.0.0.1, for tests that push and pull with the real
`huggingface_hub` / `transformers` code paths (no patching of their internals).

It implements the part of the Hub API that `create_repo`, `create_branch`, `create_tag`, `upload_folder` /
`create_commit` (preupload, regular base64 files and LFS "basic" uploads), `repo_info` / `model_info`,
`list_repo_tree`, `list_repo_files`, `list_repo_refs`, `list_repo_commits`, `get_paths_info`, `whoami`,
`hf_hub_download`, `snapshot_download`, `push_to_hub` and `from_pretrained` use. Repos live in memory; file
contents are stored by sha256 under a temporary directory. Private repos answer 401 (no token) or 404 (token
without access) with `X-Error-Code: RepoNotFound`, as the real Hub does.

`huggingface_hub` reads `HF_ENDPOINT` once, when it is imported, so run the client code in a subprocess whose
environment comes from `HubServer.env()` (or use `HubServer.run_python`). `HF_HUB_DISABLE_XET=1` is part of that
environment: with `hf_xet` installed the client would upload LFS files through Xet storage, which this server does
not implement; with Xet disabled they go through the LFS batch API, which it does. (`HubServer(lfs=False)`
answers "regular" for every file instead, so uploads are inlined base64 whatever `HF_HUB_DISABLE_XET` says.)

Usage in a test module (pytest puts `tests/` on `sys.path`):

    from hub_server import hub_server  # noqa: F401  (the fixture)

    def test_round_trip(hub_server, tmp_path):
        hub_server.run_python("from huggingface_hub import HfApi; HfApi().create_repo('user/x')", hf_home=tmp_path)
        # or: subprocess.run([...], env=hub_server.env(tmp_path / "hf_home"))
        # run_python(..., hide_modules=("my_package",)) makes `import my_package` fail in that process.

Run standalone: `python tests/hub_server.py [--port 8080]` prints the URL and a write token.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


DEFAULT_USER = "user"
DEFAULT_ORG = "org"
DEFAULT_TOKEN = "hf_hubserver_write_token_user"
OTHER_USER = "other"
OTHER_TOKEN = "hf_hubserver_write_token_other"

# What the real Hub writes in a new repo's first commit (abridged): these patterns go to LFS.
GITATTRIBUTES = """*.7z filter=lfs diff=lfs merge=lfs -text
*.bin filter=lfs diff=lfs merge=lfs -text
*.ckpt filter=lfs diff=lfs merge=lfs -text
*.gz filter=lfs diff=lfs merge=lfs -text
*.h5 filter=lfs diff=lfs merge=lfs -text
*.msgpack filter=lfs diff=lfs merge=lfs -text
*.npy filter=lfs diff=lfs merge=lfs -text
*.onnx filter=lfs diff=lfs merge=lfs -text
*.pkl filter=lfs diff=lfs merge=lfs -text
*.pt filter=lfs diff=lfs merge=lfs -text
*.pth filter=lfs diff=lfs merge=lfs -text
*.safetensors filter=lfs diff=lfs merge=lfs -text
*.tar filter=lfs diff=lfs merge=lfs -text
*.zip filter=lfs diff=lfs merge=lfs -text
*tfevents* filter=lfs diff=lfs merge=lfs -text
"""
_LFS_SUFFIXES = tuple(line.split()[0].lstrip("*") for line in GITATTRIBUTES.splitlines() if line.startswith("*."))
_REGULAR_MAX_SIZE = 10 * 1024 * 1024  # the Hub sends bigger files to LFS whatever their name
_COMMIT_SHA = re.compile(r"[0-9a-f]{40}")
_REPO_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space", "kernels": "kernel"}
_URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/", "kernel": "kernels/"}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


@dataclass
class _File:
    sha256: str
    size: int
    lfs: bool

    @property
    def pointer_size(self) -> int:
        return len(_lfs_pointer(self.sha256, self.size))


@dataclass
class _Commit:
    oid: str
    parent: str | None
    title: str
    message: str
    author: str
    date: str
    files: dict[str, _File]
    git_oids: dict[str, str]  # path -> git blob oid (of the content, or of the LFS pointer)


@dataclass
class _Repo:
    type: str
    id: str
    private: bool
    created_at: str
    commits: dict[str, _Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)  # name -> commit oid; PRs are "refs/pr/N"
    tags: dict[str, str] = field(default_factory=dict)
    n_prs: int = 0

    @property
    def url_path(self) -> str:
        return _URL_PREFIX[self.type] + self.id

    def resolve(self, revision: str) -> _Commit | None:
        for refs in (self.branches, self.tags):
            if revision in refs:
                return self.commits[refs[revision]]
        for prefix, refs in (("refs/heads/", self.branches), ("refs/tags/", self.tags)):
            if revision.startswith(prefix) and revision[len(prefix) :] in refs:
                return self.commits[refs[revision[len(prefix) :]]]
        if re.fullmatch(r"[0-9a-f]{7,40}", revision):
            found = [c for oid, c in self.commits.items() if oid.startswith(revision)]
            if len(found) == 1:
                return found[0]
        return None


class HubError(Exception):
    """An HTTP error answered the way the Hub answers it (status, `X-Error-Code`, `X-Error-Message`)."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: dict | None = None, **body):
        super().__init__(message)
        self.status, self.message, self.code, self.headers, self.body = status, message, code, headers or {}, body


class HubState:
    """Users, repos, commits and blobs. All methods are called under `self.lock`."""

    def __init__(self, root: Path, users: dict[str, tuple[str, list[str]]], lfs: bool = True):
        self.root = root
        self.blobs = root / "blobs"
        self.blobs.mkdir(parents=True, exist_ok=True)
        self.users = users  # token -> (user name, org names)
        self.lfs = lfs
        self.repos: dict[tuple[str, str], _Repo] = {}
        self.lock = threading.RLock()
        self.log: list[str] = []  # "METHOD path -> status", for debugging a failing test
        self.unhandled: list[str] = []  # requests for endpoints this server does not implement

    # -- blobs -------------------------------------------------------------------------------------------
    def put_blob(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        path = self.blobs / sha
        if not path.exists():
            tmp = path.with_suffix(f".tmp{threading.get_ident()}")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return sha

    def blob_path(self, sha256: str) -> Path:
        return self.blobs / sha256

    # -- auth ----------------------------------------------------------------------------------------------
    def user_for(self, authorization: str | None) -> str | None:
        """The user a bearer token belongs to; None without a token; 401 for an unknown token."""
        if not authorization:
            return None
        token = authorization.split(" ", 1)[1].strip() if " " in authorization else authorization.strip()
        if token not in self.users:
            raise HubError(401, "Invalid credentials in Authorization header")
        return self.users[token][0]

    def namespaces(self, user: str | None) -> set[str]:
        for name, orgs in self.users.values():
            if name == user:
                return {name, *orgs}
        return set()

    def repo(self, repo_type: str, repo_id: str, user: str | None, write: bool = False) -> _Repo:
        repo = self.repos.get((repo_type, repo_id))
        readable = repo is not None and (not repo.private or repo_id.split("/")[0] in self.namespaces(user))
        if not readable:
            # The Hub hides whether a repo exists: 401 without a token, 404 with one.
            status = 401 if user is None else 404
            message = "Invalid username or password." if user is None else "Repository not found"
            raise HubError(status, message, "RepoNotFound")
        if write and repo_id.split("/")[0] not in self.namespaces(user):
            raise HubError(403, f"You don't have the rights to write to {repo_type}s/{repo_id}")
        return repo

    def commit_for(self, repo: _Repo, revision: str) -> _Commit:
        commit = repo.resolve(revision)
        if commit is None:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return commit

    # -- writes --------------------------------------------------------------------------------------------
    def create_repo(self, repo_type: str, repo_id: str, private: bool, user: str, url: str) -> _Repo:
        if (repo_type, repo_id) in self.repos:  # the Hub's 409 carries the URL: create_repo(exist_ok=True) reads it
            raise HubError(409, f"You already created this {repo_type} repo",
                           url=f"{url}/{_URL_PREFIX[repo_type]}{repo_id}")
        repo = _Repo(type=repo_type, id=repo_id, private=private, created_at=_now())
        self.repos[(repo_type, repo_id)] = repo
        gitattributes = GITATTRIBUTES.encode()
        first = self.make_commit(
            repo, None, {".gitattributes": _File(self.put_blob(gitattributes), len(gitattributes), False)},
            "initial commit", "", user,
        )
        repo.branches["main"] = first.oid
        return repo

    def make_commit(self, repo, parent, files, title, message, author) -> _Commit:
        git_oids = {}
        for path, f in files.items():
            content = _lfs_pointer(f.sha256, f.size) if f.lfs else self.blob_path(f.sha256).read_bytes()
            git_oids[path] = _git_blob_oid(content)
        date = _now()
        payload = json.dumps([parent, sorted(git_oids.items()), title, message, author, date, len(repo.commits)])
        oid = hashlib.sha1(payload.encode()).hexdigest()
        commit = _Commit(oid, parent, title, message, author, date, dict(files), git_oids)
        repo.commits[oid] = commit
        return commit

    def upload_mode(self, path: str, size: int, sample: bytes) -> str:
        if not self.lfs or size == 0:
            return "regular"
        if path.endswith(_LFS_SUFFIXES) or "tfevents" in path or size > _REGULAR_MAX_SIZE or b"\0" in sample:
            return "lfs"
        return "regular"


def _file_entry(commit: _Commit, path: str, f: _File, last: _Commit | None = None) -> dict:
    entry = {"type": "file", "oid": commit.git_oids[path], "size": f.size, "path": path}
    if f.lfs:
        entry["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": f.pointer_size}
    if last is not None:
        entry["lastCommit"] = {"id": last.oid, "title": last.title, "date": last.date}
    return entry


def _folder_entry(commit: _Commit, path: str, last: _Commit | None = None) -> dict:
    entry = {"type": "directory", "oid": hashlib.sha1(f"{commit.oid}:{path}".encode()).hexdigest(), "size": 0,
             "path": path}
    if last is not None:
        entry["lastCommit"] = {"id": last.oid, "title": last.title, "date": last.date}
    return entry


def _last_commit_touching(repo: _Repo, commit: _Commit, path: str) -> _Commit:
    """The newest ancestor of `commit` (itself included) that changed `path` or a file under it."""

    def snapshot(c: _Commit) -> dict:
        return {p: o for p, o in c.git_oids.items() if p == path or p.startswith(path + "/")}

    current, here = commit, snapshot(commit)
    while current.parent is not None:
        parent = repo.commits[current.parent]
        if snapshot(parent) != here:
            return current
        current = parent
    return current


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    # -- plumbing ------------------------------------------------------------------------------------------
    def log_message(self, format, *args):  # noqa: A002 - silence stderr; requests go to state.log
        pass

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None, content_type="application/json"):
        self.send_response(status)
        headers = {"Content-Type": content_type, **(headers or {})}
        headers.setdefault("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)
        self.server.state.log.append(f"{self.command} {self.path} -> {status}")

    def _json(self, obj, status: int = 200, headers: dict | None = None):
        self._send(status, json.dumps(obj).encode(), headers)

    def _error(self, err: HubError):
        headers = {"X-Error-Message": err.message, **err.headers}
        if err.code:
            headers["X-Error-Code"] = err.code
        self._json({"error": err.message, **err.body}, err.status, headers)

    def _dispatch(self):
        state = self.server.state
        raw_path, _, query = self.path.partition("?")
        self.query = urllib.parse.parse_qs(query, keep_blank_values=True)
        self.parts = [urllib.parse.unquote(p) for p in raw_path.strip("/").split("/")]
        try:
            body = self._read_body() if self.command in ("POST", "PUT", "DELETE") else b""
            with state.lock:
                self.user = state.user_for(self.headers.get("Authorization"))
                self._route(body)
        except HubError as err:
            self._error(err)
        except Exception as exc:  # a bug here should fail the test loudly, not hang it
            self._json({"error": f"{type(exc).__name__}: {exc}"}, 500)
            raise

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _dispatch

    def _route(self, body: bytes):
        p, method = self.parts, self.command
        if p[0] == "api":
            if p[1:] == ["whoami-v2"] and method == "GET":
                return self._whoami()
            if p[1:] == ["repos", "create"] and method == "POST":
                return self._create_repo(json.loads(body or b"{}"))
            if p[1:] == ["repos", "delete"] and method == "DELETE":
                return self._delete_repo(json.loads(body or b"{}"))
            if p[1:] == ["validate-yaml"] and method == "POST":
                return self._json({"errors": [], "warnings": []})
            if len(p) >= 4 and p[1] in _REPO_TYPES:
                return self._repo_api(_REPO_TYPES[p[1]], f"{p[2]}/{p[3]}", p[4:], body)
        if p[0] == "__lfs" and len(p) == 3:
            return self._lfs_object(p[1], p[2], body)
        repo_type, rest = ("model", p)
        if p[0] in _REPO_TYPES and p[0] != "models":
            repo_type, rest = _REPO_TYPES[p[0]], p[1:]
        if len(rest) >= 5 and rest[2] == "resolve" and method in ("GET", "HEAD"):
            return self._resolve(repo_type, f"{rest[0]}/{rest[1]}", rest[3], "/".join(rest[4:]))
        if rest[-4:] == ["info", "lfs", "objects", "batch"] and len(rest) == 6 and rest[1].endswith(".git"):
            return self._lfs_batch(repo_type, f"{rest[0]}/{rest[1][:-4]}", json.loads(body))
        self._unhandled()

    def _unhandled(self):
        self.server.state.unhandled.append(f"{self.command} {self.path}")
        raise HubError(404, f"This test Hub server does not implement {self.command} {self.path}")

    # -- account / repos -----------------------------------------------------------------------------------
    def _whoami(self):
        if self.user is None:
            raise HubError(401, "Invalid username or password.")
        orgs = sorted(self.server.state.namespaces(self.user) - {self.user})
        self._json({
            "type": "user", "id": hashlib.md5(self.user.encode()).hexdigest()[:24], "name": self.user,
            "fullname": self.user, "email": f"{self.user}@example.com", "emailVerified": True, "isPro": False,
            "orgs": [{"type": "org", "name": o, "fullname": o, "roleInOrg": "admin"} for o in orgs],
            "auth": {"type": "access_token", "accessToken": {"displayName": "hub_server", "role": "write"}},
        })

    def _create_repo(self, payload: dict):
        if self.user is None:
            raise HubError(401, "You must be authenticated to create a repo")
        namespace = payload.get("organization") or self.user
        if namespace not in self.server.state.namespaces(self.user):
            raise HubError(403, f"You don't have the rights to create a repo under the namespace {namespace}")
        repo_type = payload.get("type") or "model"
        private = payload.get("visibility", "private" if payload.get("private") else "public") != "public"
        repo = self.server.state.create_repo(repo_type, f"{namespace}/{payload['name']}", private, self.user,
                                             self.server.url)
        self._json({"url": f"{self.server.url}/{repo.url_path}", "name": repo.id, "id": repo.id})

    def _delete_repo(self, payload: dict):
        namespace = payload.get("organization") or self.user
        repo_type = payload.get("type") or "model"
        self.server.state.repo(repo_type, f"{namespace}/{payload['name']}", self.user, write=True)
        del self.server.state.repos[(repo_type, f"{namespace}/{payload['name']}")]
        self._json({})

    def _repo_api(self, repo_type: str, repo_id: str, rest: list[str], body: bytes):
        state, method = self.server.state, self.command
        action = rest[0] if rest else None
        if action in ("xet-write-token", "xet-read-token"):
            raise HubError(501, "This test Hub server does not implement Xet storage: set HF_HUB_DISABLE_XET=1")
        write = method in ("POST", "PUT", "DELETE") and action not in ("paths-info",)
        repo = state.repo(repo_type, repo_id, self.user, write=write)
        revision = rest[1] if len(rest) > 1 else "main"
        if action is None and method == "GET":
            return self._repo_info(repo, "main")
        if action == "revision" and method == "GET":
            return self._repo_info(repo, revision)
        if action == "tree" and method == "GET":
            return self._tree(repo, revision, "/".join(rest[2:]))
        if action == "paths-info" and method == "POST":
            return self._paths_info(repo, revision, body)
        if action == "refs" and method == "GET":
            return self._refs(repo)
        if action == "commits" and method == "GET":
            return self._commits(repo, revision)
        if action == "branch" and method in ("POST", "DELETE"):
            return self._branch(repo, "/".join(rest[1:]), json.loads(body or b"{}"))
        if action == "tag" and method in ("POST", "DELETE"):
            return self._tag(repo, "/".join(rest[1:]), json.loads(body or b"{}"))
        if action == "settings" and method == "PUT":
            payload = json.loads(body or b"{}")
            if "private" in payload:
                repo.private = bool(payload["private"])
            if "visibility" in payload:
                repo.private = payload["visibility"] != "public"
            return self._json({})
        if action == "preupload" and method == "POST":
            return self._preupload(repo, revision, json.loads(body))
        if action == "commit" and method == "POST":
            return self._commit(repo, revision, body)
        self._unhandled()

    def _repo_info(self, repo: _Repo, revision: str):
        commit = self.server.state.commit_for(repo, revision)
        blobs = self.query.get("blobs", ["false"])[0].lower() in ("1", "true")
        siblings = []
        for path, f in sorted(commit.files.items()):
            sibling = {"rfilename": path}
            if blobs:
                sibling.update(size=f.size, blobId=commit.git_oids[path])
                if f.lfs:
                    sibling["lfs"] = {"size": f.size, "sha256": f.sha256, "pointerSize": f.pointer_size}
            siblings.append(sibling)
        info = {
            "_id": hashlib.md5(repo.id.encode()).hexdigest()[:24], "id": repo.id, "author": repo.id.split("/")[0],
            "sha": commit.oid, "lastModified": commit.date, "createdAt": repo.created_at, "private": repo.private,
            "gated": False, "disabled": False, "downloads": 0, "likes": 0, "tags": [], "siblings": siblings,
        }
        if "config.json" in commit.files and repo.type == "model":
            with contextlib.suppress(ValueError):
                config = json.loads(self.server.state.blob_path(commit.files["config.json"].sha256).read_bytes())
                info["config"] = {k: config[k] for k in ("architectures", "model_type", "auto_map") if k in config}
        if blobs:
            info["usedStorage"] = sum(f.size for f in commit.files.values())
        self._json(info)

    def _tree(self, repo: _Repo, revision: str, path: str):
        commit = self.server.state.commit_for(repo, revision)
        recursive = self.query.get("recursive", ["false"])[0].lower() in ("1", "true")
        expand = self.query.get("expand", ["false"])[0].lower() in ("1", "true")
        prefix = f"{path.strip('/')}/" if path.strip("/") else ""
        if prefix and not any(p.startswith(prefix) for p in commit.files):
            raise HubError(404, f"{path} does not exist on \"{revision}\"", "EntryNotFound",
                           {"X-Repo-Commit": commit.oid})
        files, folders = [], set()
        for p in sorted(commit.files):
            if not p.startswith(prefix):
                continue
            parts = p[len(prefix) :].split("/")
            for depth in range(1, len(parts)):
                if recursive or depth == 1:
                    folders.add(prefix + "/".join(parts[:depth]))
            if recursive or len(parts) == 1:
                files.append(p)

        def last(p):
            return _last_commit_touching(repo, commit, p) if expand else None

        entries = [_folder_entry(commit, d, last(d)) for d in sorted(folders)]
        entries += [_file_entry(commit, p, commit.files[p], last(p)) for p in files]
        self._json(entries)

    def _paths_info(self, repo: _Repo, revision: str, body: bytes):
        commit = self.server.state.commit_for(repo, revision)
        if self.headers.get("Content-Type", "").startswith("application/json"):
            payload = json.loads(body)
            paths, expand = payload.get("paths", []), payload.get("expand", False)
        else:
            form = urllib.parse.parse_qs(body.decode(), keep_blank_values=True)
            paths, expand = form.get("paths", []), form.get("expand", ["false"])[0].lower() in ("1", "true")
        entries = []
        for path in [paths] if isinstance(paths, str) else paths:
            path = path.strip("/")
            last = _last_commit_touching(repo, commit, path) if expand else None
            if path in commit.files:
                entries.append(_file_entry(commit, path, commit.files[path], last))
            elif any(p.startswith(path + "/") for p in commit.files):
                entries.append(_folder_entry(commit, path, last))
        self._json(entries)

    def _refs(self, repo: _Repo):
        def ref(kind, name, oid):
            return {"name": name, "ref": name if name.startswith("refs/") else f"refs/{kind}/{name}",
                    "targetCommit": oid}

        branches = [ref("heads", n, o) for n, o in repo.branches.items() if not n.startswith("refs/pr/")]
        prs = [ref("pr", n, o) for n, o in repo.branches.items() if n.startswith("refs/pr/")]
        self._json({"branches": branches, "converts": [], "tags": [ref("tags", n, o) for n, o in repo.tags.items()],
                    **({"pullRequests": prs} if self.query.get("include_prs") else {})})

    def _commits(self, repo: _Repo, revision: str):
        commit, history = self.server.state.commit_for(repo, revision), []
        while commit is not None:
            history.append({"id": commit.oid, "title": commit.title, "message": commit.message,
                            "date": commit.date, "authors": [{"user": commit.author}]})
            commit = repo.commits[commit.parent] if commit.parent else None
        self._json(history)

    def _branch(self, repo: _Repo, branch: str, payload: dict):
        if self.command == "DELETE":
            if branch not in repo.branches or branch == "main":
                raise HubError(404 if branch != "main" else 403, f"Cannot delete branch {branch}", "RevisionNotFound")
            del repo.branches[branch]
            return self._json({})
        if branch.startswith("refs/") or branch in repo.tags:
            raise HubError(400, f"Invalid reference for a branch: {branch}")
        if branch in repo.branches:
            raise HubError(409, "Reference already exists")
        start = self.server.state.commit_for(repo, payload.get("startingPoint") or "main")
        if payload.get("emptyBranch"):
            start = self.server.state.make_commit(repo, None, {}, f"Create branch {branch}", "", self.user)
        repo.branches[branch] = start.oid
        self._json({})

    def _tag(self, repo: _Repo, name: str, payload: dict):
        if self.command == "DELETE":
            if name not in repo.tags:
                raise HubError(404, f"Tag {name} not found", "RevisionNotFound")
            del repo.tags[name]
            return self._json({})
        if payload.get("tag") in repo.tags:
            raise HubError(409, "Tag already exists")
        repo.tags[payload["tag"]] = self.server.state.commit_for(repo, name).oid
        self._json({})

    # -- uploads -------------------------------------------------------------------------------------------
    def _preupload(self, repo: _Repo, revision: str, payload: dict):
        state = self.server.state
        commit = repo.resolve(revision)
        files = []
        for f in payload.get("files", []):
            mode = state.upload_mode(f["path"], int(f["size"]), base64.b64decode(f.get("sample", "")))
            oid = None
            existing = commit.files.get(f["path"]) if commit else None
            if existing is not None and existing.lfs == (mode == "lfs"):
                oid = existing.sha256 if existing.lfs else commit.git_oids[f["path"]]
            files.append({"path": f["path"], "uploadMode": mode, "shouldIgnore": False, "oid": oid})
        self._json({"files": files, "commitOid": commit.oid if commit else None})

    def _commit(self, repo: _Repo, revision: str, body: bytes):
        state = self.server.state
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "The first line of a commit must be its header")
        header = lines[0]["value"]
        create_pr = bool(self.query.get("create_pr"))
        if revision not in repo.branches:
            if repo.resolve(revision) is not None:
                raise HubError(400, f"Can only commit to a branch, not to {revision}")
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        head = repo.commits[repo.branches[revision]]
        parent = header.get("parentCommit")
        if parent and not create_pr and not head.oid.startswith(parent):
            raise HubError(412, f"A commit has happened since. Please refresh and try again. ({head.oid})")
        base = repo.resolve(parent) if (parent and create_pr) else head
        files = dict(base.files)
        for line in lines[1:]:
            key, value = line["key"], line["value"]
            path = value["path"].strip("/")
            if key == "file":
                data = base64.b64decode(value["content"]) if value.get("encoding") == "base64" else \
                    value["content"].encode()
                files[path] = _File(state.put_blob(data), len(data), False)
            elif key == "lfsFile":
                blob = state.blob_path(value["oid"])
                if not blob.exists():
                    raise HubError(400, f"LFS object {value['oid']} for {path} was not uploaded")
                files[path] = _File(value["oid"], blob.stat().st_size, True)
            elif key == "deletedFile":
                if path not in files:
                    raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
                del files[path]
            elif key == "deletedFolder":
                doomed = [p for p in files if p.startswith(path + "/")]
                if not doomed:
                    raise HubError(404, f"A folder with this name doesn't exist: {path}", "EntryNotFound")
                for p in doomed:
                    del files[p]
            else:
                raise HubError(400, f"Unknown commit operation {key!r}")
        commit = state.make_commit(repo, base.oid, files, header.get("summary") or "Update",
                                   header.get("description") or "", self.user)
        answer = {"success": True, "commitOid": commit.oid,
                  "commitUrl": f"{self.server.url}/{repo.url_path}/commit/{commit.oid}", "pullRequestUrl": None}
        if create_pr:
            repo.n_prs += 1
            repo.branches[f"refs/pr/{repo.n_prs}"] = commit.oid
            answer["pullRequestUrl"] = f"{self.server.url}/{repo.url_path}/discussions/{repo.n_prs}"
        else:
            repo.branches[revision] = commit.oid
        self._json(answer)

    def _lfs_batch(self, repo_type: str, repo_id: str, payload: dict):
        state = self.server.state
        if payload.get("operation") == "upload":
            state.repo(repo_type, repo_id, self.user, write=True)
        else:
            state.repo(repo_type, repo_id, self.user)
        objects = []
        for obj in payload.get("objects", []):
            oid, size = obj["oid"], int(obj["size"])
            answer = {"oid": oid, "size": size, "authenticated": True}
            exists = state.blob_path(oid).exists()
            if payload.get("operation") == "upload" and not exists:
                answer["actions"] = {
                    "upload": {"href": f"{self.server.url}/__lfs/upload/{oid}", "header": {}},
                    "verify": {"href": f"{self.server.url}/__lfs/verify/{oid}", "header": {}},
                }
            elif payload.get("operation") == "download":
                if exists:
                    answer["actions"] = {"download": {"href": f"{self.server.url}/__lfs/download/{oid}"}}
                else:
                    answer["error"] = {"code": 404, "message": "Object does not exist"}
            objects.append(answer)
        self._send(200, json.dumps({"transfer": "basic", "objects": objects, "hash_algo": "sha256"}).encode(),
                   content_type="application/vnd.git-lfs+json")

    def _lfs_object(self, action: str, oid: str, body: bytes):
        """The storage side of an LFS transfer (the real Hub hands out presigned S3 URLs instead)."""
        state = self.server.state
        if action == "upload" and self.command == "PUT":
            if hashlib.sha256(body).hexdigest() != oid:
                raise HubError(400, f"Uploaded content does not match sha256 {oid}")
            state.put_blob(body)
            return self._send(200, headers={"ETag": f'"{oid}"'})
        if action == "verify" and self.command == "POST":
            payload = json.loads(body)
            path = state.blob_path(oid)
            if not path.exists() or path.stat().st_size != int(payload["size"]):
                raise HubError(404, f"LFS object {oid} not found or of the wrong size")
            return self._json({})
        if action == "download" and self.command in ("GET", "HEAD") and state.blob_path(oid).exists():
            return self._send(200, state.blob_path(oid).read_bytes(), content_type="application/octet-stream")
        raise HubError(404, f"No LFS object action {action} for {oid}")

    # -- downloads -----------------------------------------------------------------------------------------
    def _resolve(self, repo_type: str, repo_id: str, revision: str, path: str):
        state = self.server.state
        repo = state.repo(repo_type, repo_id, self.user)
        commit = state.commit_for(repo, revision)
        f = commit.files.get(path)
        if f is None:
            raise HubError(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": commit.oid})
        data = state.blob_path(f.sha256).read_bytes()
        headers = {"X-Repo-Commit": commit.oid, "Accept-Ranges": "bytes",
                   "ETag": f'"{f.sha256 if f.lfs else commit.git_oids[path]}"'}
        if f.lfs:
            headers.update({"X-Linked-Etag": f'"{f.sha256}"', "X-Linked-Size": str(f.size)})
        status, rng = 200, self.headers.get("Range")
        match = re.fullmatch(r"bytes=(\d*)-(\d*)", rng or "")
        if match and f.size:
            start = int(match[1]) if match[1] else max(0, f.size - int(match[2]))
            end = int(match[2]) if match[1] and match[2] else f.size - 1
            if start >= f.size:
                raise HubError(416, "Requested range not satisfiable", headers={"Content-Range": f"bytes */{f.size}"})
            end = min(end, f.size - 1)
            data, status = data[start : end + 1], 206
            headers["Content-Range"] = f"bytes {start}-{end}/{f.size}"
        self._send(status, data, headers, content_type="application/octet-stream")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: HubState
    url: str


class HubServer:
    """A running Hub-compatible server: `url`, a write `token` for `user` (who also belongs to `org`), and
    `other_token` for a second user `other` without access to `user`'s private repos."""

    def __init__(self, root: str | os.PathLike | None = None, *, lfs: bool = True, port: int = 0):
        self._own_root = root is None
        self.root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="hub_server_"))
        self.user, self.org, self.token = DEFAULT_USER, DEFAULT_ORG, DEFAULT_TOKEN
        self.other_user, self.other_token = OTHER_USER, OTHER_TOKEN
        users = {DEFAULT_TOKEN: (DEFAULT_USER, [DEFAULT_ORG]), OTHER_TOKEN: (OTHER_USER, [])}
        self.state = HubState(self.root, users, lfs=lfs)
        self._httpd = _Server(("127.0.0.1", port), _Handler)
        self._httpd.state = self.state
        self.url = self._httpd.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread: threading.Thread | None = None

    def start(self) -> HubServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="hub_server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def env(self, hf_home: str | os.PathLike, *, token: str | None | bool = True, **extra: str) -> dict[str, str]:
        """An environment for a subprocess that talks to this server: `os.environ` plus `HF_ENDPOINT`,
        `HF_TOKEN` (this server's write token; pass `token=None` for none, or another token string),
        `HF_HOME` (give each client process that should start with an empty cache its own directory),
        `HF_HUB_DISABLE_XET=1`, telemetry/offline switches off, and `extra`."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("HF_", "HUGGINGFACE_")) and k not in ("TRANSFORMERS_OFFLINE", "TRANSFORMERS_CACHE")}
        env.update(HF_ENDPOINT=self.url, HF_HOME=str(hf_home), HF_HUB_DISABLE_XET="1",
                   HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_ETAG_TIMEOUT="30",
                   HF_HUB_DOWNLOAD_TIMEOUT="30", TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
        if token is True:
            env["HF_TOKEN"] = self.token
        elif token:
            env["HF_TOKEN"] = str(token)
        env.update(extra)
        return env

    @property
    def unhandled(self) -> list[str]:
        """Requests this server answered 404 only because it does not implement them (the real Hub would)."""
        return self.state.unhandled

    def run_python(self, code: str, *, hf_home: str | os.PathLike, token: str | None | bool = True,
                   env: dict[str, str] | None = None, hide_modules: tuple[str, ...] = (),
                   cwd: str | os.PathLike | None = None, check: bool = True,
                   timeout: float = 120) -> subprocess.CompletedProcess:
        """Run `python -c code` in a subprocess pointed at this server (see `env`; `env` adds variables).
        `hide_modules` makes `import NAME` raise ImportError there, even for an installed package (to load a
        model with `trust_remote_code=True` only). With `check`, a non-zero exit raises an AssertionError
        carrying the output and the server's last requests."""
        if hide_modules:
            code = f"import sys\nsys.modules.update(dict.fromkeys({list(hide_modules)!r}))\n" + code
        proc = subprocess.run([sys.executable, "-c", code], env=self.env(hf_home, token=token, **(env or {})),
                              cwd=cwd, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"subprocess failed ({proc.returncode})\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}\n"
                f"--- last server requests\n" + "\n".join(self.state.log[-30:]))
        return proc


@pytest.fixture(scope="session")
def hub_server():
    """A `HubServer` on a free port of 127.0.0.1, stopped (and its storage removed) after the session."""
    with HubServer() as server:
        yield server


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--root", default=None, help="where to store blobs (default: a temporary directory)")
    parser.add_argument("--no-lfs", action="store_true", help="answer 'regular' for every file in preupload")
    args = parser.parse_args(argv)
    server = HubServer(args.root, lfs=not args.no_lfs, port=args.port)
    print(f"HF_ENDPOINT={server.url} HF_TOKEN={server.token} HF_HUB_DISABLE_XET=1", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()


if __name__ == "__main__":
    main()
