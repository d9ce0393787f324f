"""Per-cluster known_hosts: merge, replace a changed key, non-22 ports, forget."""

from clusterkit.remote import known_hosts


def test_record_merges_replaces_and_forgets(tmp_path, monkeypatch):
    monkeypatch.setenv(known_hosts.HOME_ENV, str(tmp_path))
    path = known_hosts.record("c1", {"127.0.0.2": "ssh-ed25519 AAAA1"})
    assert path == tmp_path / "clusters" / "c1" / "known_hosts"
    known_hosts.record("c1", {"127.0.0.3": "ssh-ed25519 AAAA2",
                              "127.0.0.2": "ssh-ed25519 NEWKEY"})
    assert path.read_text().splitlines() == ["127.0.0.2 ssh-ed25519 NEWKEY",
                                             "127.0.0.3 ssh-ed25519 AAAA2"]
    other = known_hosts.record("c2", {"127.0.0.9": "ssh-rsa BBBB"}, port=2222)
    assert other.read_text() == "[127.0.0.9]:2222 ssh-rsa BBBB\n"
    known_hosts.forget("c1")
    assert not path.exists() and other.exists()
