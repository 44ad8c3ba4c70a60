"""A PySpark data pipeline on the stock Kafka connector (spark-sql-kafka-0-10), the jobs the compat
suite runs against Samsa and against Apache Kafka.

The connector comes from the jars compat/jvm/fetch.sh copied into compat/target/spark (the
`spark` profile of compat/pom.xml, pinned to the installed pyspark's version). They go on the
classpath through `spark.jars`, so nothing is resolved through Ivy at run time. Jars that pyspark
already ships (scala-library, slf4j-api, snappy, lz4, jsr305, scala-parallel-collections) are
left out, so the JVM sees one copy of each.

Jobs:

- `aggregate_events`: Structured Streaming. Reads JSON events (user, amount, ts in epoch ms)
  from a topic, drops invalid ones, normalises the user name, sums amounts per user over 10-second
  tumbling event-time windows with a 10-second watermark, and writes each closed window (append
  mode) as JSON keyed by user to another topic, with a checkpoint. Runs with
  `trigger(availableNow=True)`: it processes what is in the topic now, then stops cleanly, so a
  second run on the same checkpoint resumes exactly where the first one ended (state, watermark
  and source offsets all come from the checkpoint).
- `read_range`: batch read between startingOffsets and endingOffsets given as JSON per
  partition (-2 = earliest, -1 = latest), or as a whole-topic "earliest"/"latest".
- `read_by_timestamp`: batch read with startingOffsetsByTimestamp / endingOffsetsByTimestamp
  (per partition) or startingTimestamp / endingTimestamp (every partition); the driver resolves
  them with AdminClient.listOffsets(OffsetSpec.forTimestamp).
- `write_records`: batch write (df.write.format("kafka")) of rows with topic, key, value, headers
  and explicit partitions.

Run by hand against any broker:

    .venv/bin/python -m compat.spark.pipeline --bootstrap 127.0.0.1:9092 \\
        aggregate --source events --sink totals --checkpoint /tmp/ckpt
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from compat.kafka import TARGET

SPARK_JARS = TARGET / "spark"

WINDOW = "10 seconds"
WATERMARK = "10 seconds"


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def _artifact(jar: Path) -> str:
    """The artifact name of a Maven jar file name: 'kafka-clients-3.9.0.jar' -> 'kafka-clients'."""
    return re.sub(r"-\d[^-]*(-[A-Za-z0-9.]+)?\.jar$", "", jar.name)


def connector_jars() -> list[Path]:
    """The connector's classpath (compat/target/spark) minus what pyspark already ships."""
    jars = sorted(SPARK_JARS.glob("*.jar"))
    if not any(j.name.startswith("spark-sql-kafka-0-10") for j in jars):
        raise RuntimeError(f"{SPARK_JARS} holds no spark-sql-kafka jar: run bash compat/jvm/fetch.sh spark")
    shipped = {_artifact(j) for j in pyspark_jars().glob("*.jar")}
    return [j for j in jars if _artifact(j) not in shipped]


def spark_session(app: str = "samsa-compat") -> Any:
    """A local[2] SparkSession with the connector on its classpath, bound to 127.0.0.1, no UI."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.jars", ",".join(str(j) for j in connector_jars()))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _kafka(bootstrap: str) -> dict[str, str]:
    """Options every job passes to the connector: the broker, and a bounded poll on executors
    (the default is spark.network.timeout, 120 s) so a broker that answers nothing fails fast."""
    return {"kafka.bootstrap.servers": bootstrap, "kafkaConsumer.pollTimeoutMs": "20000"}


# ------------------------------------------------------------------------------------ streaming


def aggregate_events(
    spark: Any, bootstrap: str, source: str, sink: str, checkpoint: str, timeout_s: float = 120
) -> dict:
    """One availableNow run of the streaming aggregation; returns the query's last progress
    (batch id, watermark, source end offsets). Raises if the query fails or does not finish in
    time. Several may run at once in one session (each query gets a unique name)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType(
        [StructField("user", StringType()), StructField("amount", LongType()), StructField("ts", LongType())]
    )
    events = (
        spark.readStream.format("kafka")
        .options(**_kafka(bootstrap))
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
        .select("e.*")
        .where(F.col("user").isNotNull() & F.col("ts").isNotNull() & (F.col("amount") > 0))
        .select(
            F.lower(F.trim(F.col("user"))).alias("user"),
            F.col("amount"),
            F.timestamp_millis(F.col("ts")).alias("event_time"),
        )
    )
    totals = (
        events.withWatermark("event_time", WATERMARK)
        .groupBy(F.window("event_time", WINDOW), F.col("user"))
        .agg(F.count(F.lit(1)).alias("events"), F.sum("amount").alias("total"))
    )
    out = totals.select(
        F.col("user").alias("key"),
        F.to_json(
            F.struct(
                F.col("user"),
                F.unix_millis(F.col("window.start")).alias("window_start"),
                F.unix_millis(F.col("window.end")).alias("window_end"),
                F.col("events"),
                F.col("total"),
            )
        ).alias("value"),
    )
    query = (
        out.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .trigger(availableNow=True)
        .queryName(f"aggregate_{re.sub(r'[^A-Za-z0-9_]', '_', source)}_{uuid.uuid4().hex[:8]}")
        .start()
    )
    try:
        finished = query.awaitTermination(timeout_s)
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")
        if not finished:
            raise TimeoutError(f"streaming query did not finish in {timeout_s} s")
        progress = query.lastProgress or {}
        return {
            "batchId": progress.get("batchId"),
            "watermark": (progress.get("eventTime") or {}).get("watermark"),
            "sources": [_json(s.get("endOffset")) for s in progress.get("sources", [])],
        }
    finally:
        query.stop()


def _json(v: Any) -> Any:
    return json.loads(v) if isinstance(v, str) else v


# ------------------------------------------------------------------------------------ batch


def _rows(df: Any) -> list[dict]:
    from pyspark.sql import functions as F

    rows = df.select(
        "topic",
        "partition",
        "offset",
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        F.unix_millis("timestamp").alias("timestamp"),
        "timestampType",
        F.transform("headers", lambda h: F.struct(h["key"].alias("k"), h["value"].cast("string").alias("v"))).alias(
            "headers"
        ),
    ).collect()
    out = [
        {
            "topic": r["topic"],
            "partition": r["partition"],
            "offset": r["offset"],
            "key": r["key"],
            "value": r["value"],
            "timestamp": r["timestamp"],
            "timestampType": r["timestampType"],
            "headers": [[h["k"], h["v"]] for h in (r["headers"] or [])],
        }
        for r in rows
    ]
    return sorted(out, key=lambda o: (o["topic"], o["partition"], o["offset"]))


def read_range(
    spark: Any,
    bootstrap: str,
    topic: str,
    starting: Any = "earliest",
    ending: Any = "latest",
    fail_on_data_loss: bool = True,
    isolation: str | None = None,
) -> list[dict]:
    """Batch read of `topic` between two offset specs: "earliest"/"latest" or {partition: offset}
    (-2 = earliest, -1 = latest), sorted by (partition, offset). With fail_on_data_loss false, a
    start below the log start offset skips to it instead of failing the job. `isolation`: the
    consumers' kafka.isolation.level (read_committed: "latest" is the last stable offset)."""

    def spec(s: Any) -> str:
        return s if isinstance(s, str) else json.dumps({topic: {str(p): o for p, o in s.items()}})

    df = (
        spark.read.format("kafka")
        .options(**_kafka(bootstrap))
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .option("startingOffsets", spec(starting))
        .option("endingOffsets", spec(ending))
        .option("failOnDataLoss", str(fail_on_data_loss).lower())
        .options(**({"kafka.isolation.level": isolation} if isolation else {}))
        .load()
    )
    return _rows(df)


def read_by_timestamp(
    spark: Any,
    bootstrap: str,
    topic: str,
    starting: dict[int, int] | int | None = None,
    ending: dict[int, int] | int | None = None,
) -> list[dict]:
    """Batch read of `topic` from/to timestamps: per partition ({partition: epoch ms}, the
    ...OffsetsByTimestamp options) or one for every partition (an int, startingTimestamp /
    endingTimestamp). A timestamp past every record resolves to offset -1, which Spark reads as
    "latest" for an ending offset."""
    reader = (
        spark.read.format("kafka")
        .options(**_kafka(bootstrap))
        .option("subscribe", topic)
        .option("includeHeaders", "true")
    )
    for name, value in (("starting", starting), ("ending", ending)):
        if isinstance(value, dict):
            reader = reader.option(
                f"{name}OffsetsByTimestamp", json.dumps({topic: {str(p): t for p, t in value.items()}})
            )
        elif value is not None:
            reader = reader.option(f"{name}Timestamp", str(value))
    return _rows(reader.load())


def write_records(spark: Any, bootstrap: str, records: Iterable[dict]) -> None:
    """Batch write: each record is {topic, partition (int or None), key, value (str or None),
    headers [[name, value or None]]}. One task writes them in order (coalesce(1)), so the
    offsets each partition assigns are deterministic."""
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField(
                "headers",
                ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
            ),
        ]
    )

    def b(s: str | None) -> bytearray | None:
        return None if s is None else bytearray(s.encode())

    data = [
        (
            r["topic"],
            r.get("partition"),
            b(r.get("key")),
            b(r.get("value")),
            [(k, b(v)) for k, v in r.get("headers", [])],
        )
        for r in records
    ]
    df = spark.createDataFrame(data, schema).coalesce(1)
    df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).save()


# ------------------------------------------------------------------------------------ CLI


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m compat.spark.pipeline", description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", required=True)
    sub = p.add_subparsers(dest="job", required=True)
    a = sub.add_parser("aggregate", help="one availableNow run of the streaming aggregation")
    a.add_argument("--source", required=True)
    a.add_argument("--sink", required=True)
    a.add_argument("--checkpoint", required=True)
    r = sub.add_parser("read", help="batch read, offsets as JSON per partition")
    r.add_argument("--topic", required=True)
    r.add_argument("--starting", default="earliest", help='"earliest" or {"0": 5, "1": -2}')
    r.add_argument("--ending", default="latest", help='"latest" or {"0": 9, "1": -1}')
    args = p.parse_args(argv)
    spark = spark_session()
    try:
        if args.job == "aggregate":
            print(json.dumps(aggregate_events(spark, args.bootstrap, args.source, args.sink, args.checkpoint)))
        else:

            def parse(s: str) -> Any:
                return s if s in ("earliest", "latest") else {int(k): v for k, v in json.loads(s).items()}

            for row in read_range(spark, args.bootstrap, args.topic, parse(args.starting), parse(args.ending)):
                print(json.dumps(row))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
