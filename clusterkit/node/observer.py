"""Node-side reader of a job's metrics, for `clusterkit top`, `job` and `scaling`: stdlib
only, Python >= 3.8, sent over SSH stdin like ``follower.py`` (``bundle.program``)
and run as ``python3 - VERB ARGS``. One call per node per frame says all a frame needs.

Verbs (each prints one frame, a wire record of ``frames.py``):
  observe [--job ID] [--since T] [--last N] [--health] [--root R]
                       "job_id" (ID, else the newest job here), "samples" (its sampler's
                       samples taken after epoch T, at most the last N, default 300:
                       ``samples.read_samples``) and, with --health, "health": "smi_q"
                       (`nvidia-smi -q`, null without it) and "kernel_log" (the kernel
                       log's GPU lines only: NVRM, Xid, "fallen off the bus", the last
                       200; from dmesg, sudo -n dmesg or journalctl -k; null when none
                       answers); and "state", the job's state.json here as written
                       (``nodestate.read_raw``; the master's holds an elastic job's
                       size changes), when there is one
  summary JOB_DIR [--report NAME]
                       "totals" (the job's running totals here: ``totals.read_summary``)
                       and "report" (the JSON of JOB_DIR/NAME: the report kept on the
                       master; null without --report or when there is none)

A record this program cannot read (a newer sampler's or supervisor's) is said on stderr,
exit 3 (EXIT_UNREADABLE), naming its file and both versions.
"""

import json
import os
import re
import sys

try:  # imported as clusterkit.node.observer (tests)
    from . import paths
    from .frames import EXIT_UNREADABLE, Frame, SummaryFrame
    from .nodefiles import options, read_json, run_program
    from .nodestate import read_raw
    from .samples import read_samples, read_summary
    from .wire import WireError
except ImportError:  # sent over stdin: bundle.program puts these in sys.modules
    import paths
    from frames import EXIT_UNREADABLE, Frame, SummaryFrame
    from nodefiles import options, read_json, run_program
    from nodestate import read_raw
    from samples import read_samples, read_summary
    from wire import WireError

JOBS = paths.JOBS_DIR


def health_now():
    """The GPUs' health (``gpuwatch``), imported only when asked for (--health)."""
    try:
        from . import gpuwatch
    except ImportError:
        import gpuwatch
    return gpuwatch.read_health()


def newest_job(base):
    """The newest job id under ``base`` (ids sort by their start time)."""
    try:
        names = [n for n in os.listdir(base) if n.startswith("j-")]
    except OSError:
        return None
    return max(names) if names else None


def observe(args):
    base = (options(args, "--root") or [""])[0] + JOBS
    job_id = (options(args, "--job") or [None])[0] or newest_job(base)
    if job_id is not None and not re.match(r"^j-[0-9A-Za-z-]{1,64}$", job_id):
        sys.stderr.write(f"not a job id: {job_id!r}\n")
        sys.exit(2)
    since = float((options(args, "--since") or ["0"])[0])
    last = int((options(args, "--last") or ["300"])[0])
    found = read_samples(os.path.join(base, job_id), since, last) if job_id else []
    health = health_now() if "--health" in args else None
    state = read_raw(os.path.join(base, job_id)) if job_id else None
    print(json.dumps(Frame(job_id, tuple(found), health, state).to_json()), flush=True)


def summary(job_dir, args):
    name = (options(args, "--report") or [None])[0]
    report = read_json(os.path.join(job_dir, os.path.basename(name))) if name else None
    frame = SummaryFrame(read_summary(job_dir), report if isinstance(report, dict) else None)
    print(json.dumps(frame.to_json()), flush=True)


def main(argv):
    try:
        if argv and argv[0] == "observe":
            observe(argv[1:])
            return 0
        if len(argv) >= 2 and argv[0] == "summary":
            summary(argv[1], argv[2:])
            return 0
    except WireError as exc:
        sys.stderr.write(f"{exc}\n")
        return EXIT_UNREADABLE
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    run_program(main)
