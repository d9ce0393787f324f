"""The dataset parts of a launch and of `up`'s question, without AWS: the clone as a
typed block device and as RunInstances' mapping (everything explicit), the launch
request's tags, and the dataset volumes priced in what `up` shows."""

from __future__ import annotations

from clusterkit.aws.instances import _block_device
from clusterkit.plan.launch import BlockDevice, dataset_devices, launch_request
from clusterkit.plan.nodes import node_actions
from clusterkit.plan.spend import spend
from clusterkit.plan.up import plan_up
from clusterkit.spec import loads
from tests import support

SID = "snap-0123456789abcdef0"


def _spec(dataset: str = ""):
    text = ("name: t\nregion: us-east-1\nnodes:\n  count: 4\n  instance_types: [c5.large]\n"
            "  market: on-demand\n  image: {id: ami-11111111}\n"
            "  root_volume: {size_gb: 100, type: gp3}\n")
    return loads(text + (f"storage:\n  dataset: {{{dataset}}}\n" if dataset else ""))


def test_the_clone_is_explicit_about_every_setting():
    spec = _spec(f"snapshot: {SID}, iops: 6000, throughput: 500, initialization_rate: 300, "
                 "size_gb: 200")
    (device,) = dataset_devices(spec, 200)
    assert device == BlockDevice("/dev/sdf", SID, "gp3", 200, 6000, 500, 300)
    assert _block_device(device) == {"DeviceName": "/dev/sdf", "Ebs": {
        "SnapshotId": SID, "VolumeType": "gp3", "DeleteOnTermination": True,
        "Encrypted": True, "VolumeSize": 200, "Iops": 6000, "Throughput": 500,
        "VolumeInitializationRate": 300}}


def test_the_clone_leaves_out_what_the_spec_does_not_say():
    (device,) = dataset_devices(_spec(f"snapshot: {SID}"), None)
    assert _block_device(device)["Ebs"] == {"SnapshotId": SID, "VolumeType": "gp3",
                                            "DeleteOnTermination": True, "Encrypted": True}
    assert dataset_devices(_spec(), None) == ()
    assert dataset_devices(_spec("mount: /data"), None) == ()  # no snapshot: no clone


def test_a_launch_request_tags_its_volumes_with_the_clone_and_prices_the_instances():
    spec = _spec(f"snapshot: {SID}")
    offer = support.offer("c5.large", "spot", 0.04)
    request = launch_request(spec, offer, [2, 3], "arn:stack/1")
    assert request.count == 2 and request.market == "spot"
    assert request.volume_tags["clusterkit:dataset-snapshot"] == SID
    assert request.tags["clusterkit:price"] == "0.0400"
    assert "clusterkit:price" not in request.volume_tags
    assert request.client_token == launch_request(spec, offer, [2, 3], "arn:stack/1").client_token
    assert request.client_token != launch_request(spec, offer, [2, 3], "arn:stack/2").client_token


def test_a_standby_launch_holds_no_index_and_is_not_the_nodes_launch_again():
    spec = _spec(f"snapshot: {SID}")
    offer = support.offer("c5.large", "spot", 0.04)
    node = launch_request(spec, offer, [2], "arn:stack/1")
    standby = launch_request(spec, offer, [2], "arn:stack/1", standby_of="i-0abc")
    assert standby.tags["clusterkit:standby-for"] == "2" and standby.count == 1
    assert not {"clusterkit:index", "clusterkit:slots"} & set(standby.tags)
    assert standby.volume_tags["clusterkit:dataset-snapshot"] == SID  # its own clone
    assert standby.client_token != node.client_token  # EC2 would answer with node 2


def _spend_text(spec, gib):
    candidate = support.offer("c5.large", "on-demand", 0.085)
    plan = plan_up(spec, support.observed(spec, candidates=[candidate]))
    assert node_actions("t", 4, []).launch == (0, 1, 2, 3)
    return spend(plan, spec, gib)


def test_up_prices_the_clones_it_launches_and_the_initialization_rate():
    spec = _spec(f"snapshot: {SID}, initialization_rate: 300")
    result = _spend_text(spec, 150)
    text = "\n".join(result.lines)
    # 4 x 150 GiB gp3 at $0.08 = $48/month = $0.0658/h, on top of 4 x 100 GB root volumes
    assert f"dataset volumes: 4 x 150 GiB gp3 = $48.00/month ($0.0658/h) (clones of {SID}" \
        in text
    assert "initialization rate 300 MiB/s" in text and "assumed" in text
    assert result.volumes == round(32.0 / 730 + 48.0 / 730, 4)


def test_up_without_the_snapshot_size_still_names_the_price_per_gb():
    text = "\n".join(_spend_text(_spec(f"snapshot: {SID}"), None).lines)
    assert "dataset volumes: 4 x the snapshot's size gp3 = price unknown" in text
