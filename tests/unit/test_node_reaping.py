"""The node side's cgroup and process helpers that need no root and no cgroup: where the
cgroup v2 mount is, which group a stop may kill, and the last-resort /proc scan."""

from __future__ import annotations

import os
import subprocess

from clusterkit.node import reaping

JOB_ID = "j-20250101-120000-ab12"
HYBRID_MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def test_cgroup2_mount_is_found_in_mountinfo() -> None:
    assert reaping.cgroup2_mount(HYBRID_MOUNTINFO) == "/sys/fs/cgroup/unified"
    assert reaping.cgroup2_mount(HYBRID_MOUNTINFO.replace("cgroup2 cgroup2", "cgroup x")) \
        is None
    systemd = "25 1 0:23 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw\n"
    assert reaping.cgroup2_mount(systemd) == "/sys/fs/cgroup"


def test_scan_proc_finds_a_process_by_its_job_id_and_by_its_group() -> None:
    env = {"PATH": os.environ["PATH"], "CLUSTERKIT_JOB_ID": JOB_ID}
    by_env = subprocess.Popen(["sleep", "30"], env=env)
    by_group = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        found = reaping.scan_proc({by_group.pid}, JOB_ID)
        assert {by_env.pid, by_group.pid} <= found
        assert os.getpid() not in found
        assert by_env.pid not in reaping.scan_proc(set(), "j-20250101-120000-ffff")
    finally:
        for p in (by_env, by_group):
            p.kill()
            p.wait()
    assert not {by_env.pid, by_group.pid} & reaping.scan_proc({by_group.pid}, JOB_ID)


def test_scan_proc_given_a_node_leaves_the_other_nodes_of_the_job_alone() -> None:
    """The sandbox's nodes share one PID space: node 1's sweep must not reach node 0."""
    base = {"PATH": os.environ["PATH"], "CLUSTERKIT_JOB_ID": JOB_ID}
    mine = subprocess.Popen(["sleep", "30"], env={**base, "CLUSTERKIT_NODE_RANK": "1"})
    other = subprocess.Popen(["sleep", "30"], env={**base, "CLUSTERKIT_NODE_RANK": "0"})
    try:
        found = reaping.scan_proc(set(), JOB_ID, 1)
        assert mine.pid in found and other.pid not in found
        assert {mine.pid, other.pid} <= reaping.scan_proc(set(), JOB_ID)
    finally:
        for p in (mine, other):
            p.kill()
            p.wait()


def test_stop_kills_only_the_cgroup_of_its_own_job() -> None:
    name = f"c1-0-{JOB_ID}"
    own = f"/sys/fs/cgroup/unified/clusterkit/{name}"
    assert reaping.recorded_cgroup({"cgroup": own}, name).path == own
    scope = f"/sys/fs/cgroup/system.slice/ck-{name}.scope"
    group = reaping.recorded_cgroup({"cgroup": scope, "cgroup_unit": f"ck-{name}.scope"}, name)
    assert (group.path, group.unit) == (scope, f"ck-{name}.scope")
    for state in ({"cgroup": "/sys/fs/cgroup/unified/system.slice"},
                  {"cgroup": f"/sys/fs/cgroup/unified/clusterkit/../../{name}"},
                  {"cgroup": "/x/clusterkit/" + name, "cgroup_unit": "sshd.service"},
                  {"cgroup": None}, {}):
        assert reaping.recorded_cgroup(state, name) is None
