"""`samsa`: the command line.

    samsa serve [--config server.properties] [--override key=value ...]
    samsa cluster [--brokers 3] [--dir DIR] [--override KEY=VALUE ...]
                                                a local ZooKeeper + N brokers (broker/testing/cluster.py)

With no config the broker runs with the embedded defaults: one listener on 127.0.0.1:9092, data in
./samsa-data, the embedded controller, auto topic creation on, one partition per topic. Keys of
server.properties that Samsa does not know are listed once in a warning and otherwise ignored.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import resource
import signal
import sys

from broker import api_stats
from broker.config import BrokerConfig, ConfigError, load_properties
from broker.config.topic import DEPRECATED_BROKER_CONFIGS
from broker.logs import configure_logging
from broker.malloc import keep_large_buffers

log = logging.getLogger("samsa.cli")


def raise_open_file_limit() -> None:
    """Raise the soft limit on open files to the hard limit, as the JVM does for Kafka, and
    say so in one line: every partition holds segment and index files open, every client a
    socket, so a low default soft limit (often 1024) is the first to run out."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:  # Linux refuses more than fs.nr_open; macOS OPEN_MAX
        target = _NR_OPEN_FALLBACK
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as e:
            log.warning("open file limit not raised soft=%d hard=%s error=%s", soft, _limit(hard), e)
            return
        log.info("open file limit raised from=%d to=%d hard=%s", soft, target, _limit(hard))
    else:
        log.info("open file limit soft=%s hard=%s", _limit(soft), _limit(hard))


_NR_OPEN_FALLBACK = 1 << 20
"""The soft limit asked for when the hard limit is unlimited (Linux's default fs.nr_open)."""


def _limit(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


def build_config(args: argparse.Namespace) -> BrokerConfig:
    props: dict[str, str] = {}
    if args.config:
        props.update(load_properties(args.config))
    for item in args.override or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--override expects key=value, got {item!r}")
        props[key.strip()] = value.strip()
    config, unknown = BrokerConfig.from_properties(props)
    if unknown:
        log.warning("unknown config keys ignored keys=%s", ",".join(sorted(unknown)))
    for name in sorted(props.keys() & DEPRECATED_BROKER_CONFIGS.keys()):
        log.warning("deprecated broker config accepted with no effect config=%s value=%s reason=%r",
                    name, props[name], DEPRECATED_BROKER_CONFIGS[name])
    return config


class StartupFailed(Exception):
    """The broker could not start (a port in use, ZooKeeper unreachable, data of another cluster)."""


class BrokerHalted(Exception):
    """The broker stopped itself (every log dir failed)."""


async def serve(config: BrokerConfig) -> None:
    from broker.server import Broker

    raise_open_file_limit()
    broker = Broker(config)
    try:
        await broker.start()
    except (OSError, RuntimeError, ConfigError) as e:
        log.error("broker start failed error=%s", e)
        try:
            await broker.stop()  # whatever did start: listeners, logs, the ZooKeeper session
        except Exception:
            log.exception("stopping the partly started broker failed")
        raise StartupFailed(str(e)) from e
    for address in broker.advertised_addresses():
        print(f"samsa listening on {address}", flush=True)
    keep_large_buffers()
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    asked, stopped = loop.create_task(stopping.wait()), loop.create_task(broker.wait_stopped())
    await asyncio.wait((asked, stopped), return_when=asyncio.FIRST_COMPLETED)
    asked.cancel()
    if stopped.done():  # the broker stopped itself: every log dir failed (Kafka halts)
        raise BrokerHalted("every log dir has failed")
    stopped.cancel()
    log.info("shutdown requested")
    await broker.stop()
    api_stats.write_if_requested()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="samsa", description="Kafka-compatible broker")
    sub = parser.add_subparsers(dest="command", required=True)
    p_serve = sub.add_parser("serve", help="run a broker")
    p_serve.add_argument("--config", help="a Kafka server.properties file")
    p_serve.add_argument(
        "--override", action="append", metavar="KEY=VALUE", help="set a config key (repeatable)"
    )
    p_serve.add_argument("--log-level", default="INFO")
    p_cluster = sub.add_parser("cluster", help="run a local ZooKeeper and several brokers until Ctrl-C")
    p_cluster.add_argument("--brokers", type=int, default=3)
    p_cluster.add_argument("--dir", help="data directory (default: a temporary one)")
    p_cluster.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                           help="a config of every broker (repeatable)")
    args = parser.parse_args(argv)
    if args.command == "cluster":
        from broker.testing.cluster import main as cluster_main

        cluster_args = ["--brokers", str(args.brokers)] + (["--dir", args.dir] if args.dir else []) + \
            [f"--override={o}" for o in args.override]
        return cluster_main(cluster_args)
    configure_logging(args.log_level)
    try:
        config = build_config(args)
    except (ConfigError, OSError) as e:
        print(f"samsa: {e}", file=sys.stderr)
        return 2
    if args.command == "serve":
        try:
            if config.metrics_prometheus_port:  # the loop measures its idle time for the metrics
                from broker.metrics.loop import IdleTrackingEventLoop

                with asyncio.Runner(loop_factory=IdleTrackingEventLoop) as runner:
                    runner.run(serve(config))
            else:
                asyncio.run(serve(config))
        except KeyboardInterrupt:
            pass
        except StartupFailed as e:
            print(f"samsa: cannot start: {e}", file=sys.stderr)
            return 1
        except BrokerHalted as e:
            print(f"samsa: stopped: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
