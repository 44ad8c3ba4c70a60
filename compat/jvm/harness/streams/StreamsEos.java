// A Kafka Streams application with processing.guarantee=exactly_once_v2, for
// tests/cluster/test_streams_eos.py:
//
//   java -cp <streams classpath>:<compiled> StreamsEos <bootstrap> <application id> <input> <output> <state dir>
//
// Input records carry a word as their value; the topology re-keys each by its word (a repartition
// topic), counts per word in 10-second windows of the records' timestamps (a windowed state store
// with its changelog topic, caching off so every update is sent) and writes "<word>@<window start>"
// -> count to the output topic. Internal topics have replication factor 3. It runs until its
// standard input closes, then closes the application and prints {"step": "end"}; it prints
// {"step": "state", "state": ...} on every state change.

import java.time.Duration;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

public class StreamsEos {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3], stateDir = args[4];
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.METADATA_MAX_AGE_CONFIG), 2000);
        p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 20000);
        p.put(StreamsConfig.producerPrefix(ProducerConfig.METADATA_MAX_AGE_CONFIG), 2000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .selectKey((k, word) -> word)
                .groupByKey(Grouped.with("by-word", Serdes.String(), Serdes.String()))
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofHours(1)))
                .count(Materialized.as("word-counts"))
                .toStream()
                .map((w, count) -> KeyValue.pair(w.key() + "@" + w.window().start(), count))
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) -> Harness.out("state", "state", now.toString()));
        streams.setUncaughtExceptionHandler(e -> {
            Harness.out("uncaught", "error", String.valueOf(e));
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();
        while (System.in.read() != -1) { }  // until stdin closes
        streams.close(Duration.ofSeconds(30));
        Harness.out("end");
        System.out.flush();
        System.exit(0);
    }
}
