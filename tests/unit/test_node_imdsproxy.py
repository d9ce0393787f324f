"""node/imdsproxy.py: the controller's metadata proxy in front of a fake IMDSv2 (real
HTTP both ways): the interruption watcher's own client reads its notices and instance id
through it, with the token the metadata issued; the role's credentials are refused and
never asked of the metadata; a metadata that does not answer is a 502."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import pytest

from clusterkit.node import imdsproxy, interruption
from tests.fake_imds import fake_imds

ROLE = "/latest/meta-data/iam/security-credentials/ControllerRole"


def test_the_watcher_reads_through_the_proxy_but_not_the_role():
    with fake_imds() as (endpoint, handler):
        notice = {"action": "terminate", "time": "2026-01-01T00:00:00Z"}
        handler.documents.update({interruption.ACTION_PATH: json.dumps(notice),
                                  ROLE: '{"SecretAccessKey": "s"}',
                                  "/latest/meta-data/instance-id": "i-0abc"})
        proxy = imdsproxy.serve("127.0.0.1", 0, endpoint)
        try:
            where = f"http://127.0.0.1:{proxy.server_address[1]}"
            metadata = interruption.Metadata(where)
            assert [n.action for n in metadata.notices()] == ["terminate"]
            token = metadata.token()
            assert token in handler.tokens  # the metadata's own token, passed back
            asked = urllib.request.Request(where + "/latest/meta-data/instance-id",
                                           headers={imdsproxy.TOKEN: token})
            with urllib.request.urlopen(asked) as reply:
                assert reply.read() == b"i-0abc"
            for path in (ROLE, "/latest/meta-data/iam/../iam/security-credentials/x"):
                with pytest.raises(urllib.error.HTTPError) as refused:
                    urllib.request.urlopen(urllib.request.Request(
                        where + path, headers={imdsproxy.TOKEN: token}))
                assert refused.value.code == 403
            assert not [p for _, p, _ in handler.log if "security-credentials" in p]
        finally:
            proxy.shutdown()
            proxy.server_close()


def test_a_metadata_that_does_not_answer_is_a_502():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        upstream = f"http://127.0.0.1:{closed.getsockname()[1]}"  # bound, not listening
        proxy = imdsproxy.serve("127.0.0.1", 0, upstream)
        try:
            with pytest.raises(urllib.error.HTTPError) as failed:
                urllib.request.urlopen(f"http://127.0.0.1:{proxy.server_address[1]}"
                                       "/latest/meta-data/instance-id")
            assert failed.value.code == 502
        finally:
            proxy.shutdown()
            proxy.server_close()
