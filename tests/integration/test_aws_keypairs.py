"""aws.keypairs against the emulator over HTTP: import, find by tag, delete, and the
errors AWS answers translated."""

from __future__ import annotations

import pytest

from clusterkit.aws import keypairs
from clusterkit.aws.session import make_session
from clusterkit.errors import AwsError
from tests import support
from tests.integration.conftest import REGION


@pytest.fixture
def pub(moto_env, tmp_path) -> str:
    return support.public_key(support.ssh_keygen(tmp_path / "k"))


def test_import_find_delete(pub):
    s, cluster = make_session(REGION), support.unique_name("kp")
    name = f"clusterkit-{cluster}"
    assert not keypairs.key_pair_exists(s, REGION, name)  # InvalidKeyPair.NotFound: False
    tags = {"clusterkit:cluster": cluster}
    pair_id = keypairs.import_key_pair(s, REGION, name, pub, tags)
    assert pair_id.startswith("key-")
    assert keypairs.key_pair_exists(s, REGION, name)
    assert keypairs.cluster_key_pairs(s, REGION, cluster) == [name]
    # a second import of the same name is not an error: the name comes back
    assert keypairs.import_key_pair(s, REGION, name, pub, tags) == name
    keypairs.delete_key_pair(s, REGION, name)
    assert not keypairs.key_pair_exists(s, REGION, name)
    assert keypairs.cluster_key_pairs(s, REGION, cluster) == []


def test_bad_key_material_is_translated(moto_env):
    name = support.unique_name("kp-bad")
    with pytest.raises(AwsError) as caught:
        keypairs.import_key_pair(make_session(REGION), REGION, name, "garbage",
                                 {"clusterkit:cluster": name})
    err = caught.value
    assert err.code == "InvalidKeyPair.Format"
    assert err.message.startswith(f"ImportKeyPair on {name} failed: InvalidKeyPair.Format: ")
    assert err.hint == "run with --debug for the full AWS response"
    assert (err.resource, err.exit_code) == (name, 1)
