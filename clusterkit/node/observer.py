"""Node-side reader of a job's metrics, for `clusterkit top`, `job` and `scaling`: stdlib
only, Python >= 3.8, sent over SSH stdin like ``follower.py`` (``bundle.program``)
and run as ``python3 - VERB ARGS``. One call per node per frame says all a frame needs.

Verbs:
  observe [--job ID] [--since T] [--last N] [--health] [--root R]
                       one JSON object: "job_id" (ID, else the newest job here),
                       "samples" (its sampler's samples taken after epoch T, at most
                       the last N, default 300: metrics.1.jsonl then metrics.jsonl) and,
                       with --health, "health": "smi_q" (`nvidia-smi -q`, null without
                       it) and "kernel_log" (the kernel log's GPU lines only: NVRM, Xid,
                       "fallen off the bus", the last 200; from dmesg, sudo -n dmesg or
                       journalctl -k; null when none answers)
  summary JOB_DIR      one JSON object: "totals" (summary.json: the job's running totals
                       here) and "report" (report.json, kept on the master)
"""

import json
import os
import re
import sys

try:  # imported as clusterkit.node.observer (tests)
    from . import gpuwatch, paths
    from .nodefiles import options, read_json
except ImportError:  # sent over stdin: bundle.program puts these in sys.modules
    import gpuwatch
    import paths
    from nodefiles import options, read_json

JOBS = paths.JOBS_DIR
METRICS_FILES = ("metrics.1.jsonl", "metrics.jsonl")  # the sampler's: older first


def newest_job(base):
    """The newest job id under ``base`` (ids sort by their start time)."""
    try:
        names = [n for n in os.listdir(base) if n.startswith("j-")]
    except OSError:
        return None
    return max(names) if names else None


def samples(job_dir, since, last):
    kept = []
    for name in METRICS_FILES:
        try:
            with open(os.path.join(job_dir, name)) as handle:
                lines = handle.readlines()
        except OSError:
            continue
        for line in lines:
            try:
                sample = json.loads(line)
            except ValueError:  # a line being written, or cut by a crash
                continue
            if isinstance(sample, dict) and float(sample.get("t") or 0) > since:
                kept.append(sample)
    return kept[-last:] if last > 0 else []


def observe(args):
    base = (options(args, "--root") or [""])[0] + JOBS
    job_id = (options(args, "--job") or [None])[0] or newest_job(base)
    if job_id is not None and not re.match(r"^j-[0-9A-Za-z-]{1,64}$", job_id):
        sys.stderr.write(f"not a job id: {job_id!r}\n")
        sys.exit(2)
    since = float((options(args, "--since") or ["0"])[0])
    last = int((options(args, "--last") or ["300"])[0])
    found = samples(os.path.join(base, job_id), since, last) if job_id else []
    answer = {"job_id": job_id, "samples": found}
    if "--health" in args:
        answer["health"] = gpuwatch.read_health()
    print(json.dumps(answer), flush=True)


def summary(job_dir):
    found = {key: read_json(os.path.join(job_dir, name))
             for key, name in (("totals", "summary.json"), ("report", "report.json"))}
    print(json.dumps(found), flush=True)


def main(argv):
    if argv and argv[0] == "observe":
        observe(argv[1:])
        return 0
    if len(argv) >= 2 and argv[0] == "summary":
        summary(argv[1])
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # the client went away
        sys.exit(0)
