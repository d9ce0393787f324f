"""Wall time and API calls of the spot search: one region vs all allowed regions.

Starts its own moto server on 127.0.0.1 with the recorded prices installed
(clusterkit_sandbox.spot_prices), so it needs no AWS account:

    .venv/bin/python bench/bench_spot.py [--types p4d.24xlarge,p5.48xlarge] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import socket
import statistics
import time

REGIONS = ["us-east-1", "us-west-2", "us-east-2", "eu-west-1", "eu-central-1",
           "ap-northeast-1", "ap-southeast-2", "ca-central-1"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(types: list[str], regions: list[str], repeat: int) -> tuple[float, dict[str, int], int]:
    from clusterkit.aws.offers import search_offers
    from clusterkit.aws.session import make_session

    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        # the in-process moto server print()s a complaint per Pricing API call it lacks
        with contextlib.redirect_stdout(io.StringIO()):
            result = search_offers(make_session(regions[0]), instance_types=types,
                                   regions=regions, count=4)
        times.append(time.perf_counter() - start)
    return statistics.median(times), result.api_calls, len(result.offers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", default="p4d.24xlarge,p5.48xlarge,g5.48xlarge")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    from moto.server import ThreadedMotoServer

    from clusterkit_sandbox import spot_prices

    spot_prices.install()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=_free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(AWS_ENDPOINT_URL=f"http://{host}:{port}", AWS_ACCESS_KEY_ID="testing",
                      AWS_SECRET_ACCESS_KEY="testing")
    types = args.types.split(",")
    try:
        rows = [("1 region", REGIONS[:1]), (f"{len(REGIONS)} regions", REGIONS)]
        print(f"types: {', '.join(types)}; median of {args.repeat} run(s); moto on loopback")
        for label, regions in rows:
            wall, calls, offers = _run(types, regions, args.repeat)
            total = sum(calls.values())
            detail = ", ".join(f"{k}={v}" for k, v in sorted(calls.items()))
            print(f"{label:>10}: {wall * 1000:7.0f} ms  {offers:4d} offers  {total:3d} API calls "
                  f"({detail})")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
