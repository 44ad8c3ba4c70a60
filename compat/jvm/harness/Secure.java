// One kafka-clients run over a secured listener, for compat/test_security.py: the client settings
// (bootstrap, security.protocol, SASL and TLS settings) come from a properties file; the producer
// writes two records to <topic>, a consumer of <group> reads them back, and an Admin describes
// the topic. Prints JSON lines as Harness does; every call has a bounded timeout.
//
//   java -cp <clients classpath>:<compiled> Secure <client.properties> <topic> <group>

import java.io.FileInputStream;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class Secure {
    public static void main(String[] args) throws Exception {
        Properties base = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            base.load(in);
        }
        String topic = args[1];
        String group = args[2];
        Harness.out("start", "clientVersion", Harness.AppInfoVersion.get());

        Properties pp = new Properties();
        pp.putAll(base);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; i < 2; i++) {
                RecordMetadata m = producer.send(new ProducerRecord<>(topic, 0, null, Harness.b("v" + i)))
                        .get(30, TimeUnit.SECONDS);
                Harness.out("produced", "partition", m.partition(), "offset", m.offset());
            }
        }

        Properties cp = new Properties();
        cp.putAll(base);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30_000;
            while (got.size() < 2 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    got.add(r.offset() + ":" + Harness.s(r.value()));
                }
            }
            consumer.commitSync(Duration.ofSeconds(30));
        }
        Harness.out("consumed", "records", got);

        try (Admin admin = Admin.create(base)) {
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
            Harness.out("described", "partitions", d.partitions().size());
        }
        Harness.out("end");
        System.out.flush();
        System.exit(0);
    }
}
