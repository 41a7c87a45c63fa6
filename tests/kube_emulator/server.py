"""The emulator on a socket: a threaded HTTP server on 127.0.0.1 and an ephemeral port.

    with KubeEmulator() as kube:
        client = kubernetes.client.ApiClient(kube.configuration())
        ...
        kube.api.counts()["write"]

`kubeconfig(path)` writes a kubeconfig file for code that loads one.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import kubernetes
import yaml

from tests.kube_emulator.api import Api, Response


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api: Api  # set on the per-server subclass

    def setup(self) -> None:
        super().setup()
        # answers go out as written: no Nagle delay waiting on the client's delayed ACK
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _serve(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        response = self.api.handle(self.command, url.path, query, headers, body)
        if response.hang:
            time.sleep(response.hang)
            self.close_connection = True
            return
        if response.stream is not None:
            self._stream(response)
            return
        data = json.dumps(response.body).encode()
        self.send_response(response.code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in response.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, response: Response) -> None:
        """A watch: chunked, one JSON event per line, each sent as it happens."""
        self.send_response(response.code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        events = response.stream
        try:
            for event in events:
                line = json.dumps(event).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client stopped watching
            self.close_connection = True
        finally:
            events.close()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


class KubeEmulator:
    def __init__(self, **api_options: Any):
        self.api = Api(**api_options)
        handler = type("Handler", (_Handler,), {"api": self.api})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )  # a short poll: stopping (every test's teardown) waits for it

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> KubeEmulator:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.api.close()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> KubeEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def configuration(self) -> kubernetes.client.Configuration:
        config = kubernetes.client.Configuration()
        config.host = self.url
        return config

    def kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        cluster = {"name": "emulator", "cluster": {"server": self.url}}
        user = {"name": "emulator", "user": {"token": "emulator"}}
        context = {
            "name": "emulator",
            "context": {"cluster": "emulator", "user": "emulator", "namespace": namespace},
        }
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [cluster],
            "users": [user],
            "contexts": [context],
            "current-context": "emulator",
        }
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return path
