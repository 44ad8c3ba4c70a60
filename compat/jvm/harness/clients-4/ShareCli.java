// The share group that compat/test_share_groups_cli.py runs kafka-share-groups.sh against: what
// happened, one JSON object per line.
//
//   java -cp <clients classpath>:<compiled> ShareCli <bootstrap> <topic> <group> <base timestamp ms>
//
// Creates the topic with 2 partitions and produces 3 records to each, partition p's record i with
// the timestamp base + i seconds (for --to-datetime); sets the group's
// share.auto.offset.reset=earliest with the AdminClient and reads it back (Kafka's broker applies
// a group config a moment after the alter); one KafkaShareConsumer (explicit acknowledgement)
// consumes and accepts the six records. A classic group, <group>-classic, gets an offset committed
// (Admin alterConsumerGroupOffsets: an Empty classic group). Then it prints {"step": "holding"} and keeps the member in
// the group until its standard input closes; then it closes the consumer (the group is Empty).

import java.io.InputStream;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ShareCli {
    static final long DEADLINE_MS = 60_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        long base = Long.parseLong(args[3]);
        Harness.out("start", "clientVersion", Harness.AppInfoVersion.get());
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap));
             KafkaProducer<String, String> producer = new KafkaProducer<>(Map.of(
                     ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                     ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName(),
                     ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName()))) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get(30, TimeUnit.SECONDS);
            for (int p = 0; p < 2; p++) {
                for (int i = 0; i < 3; i++) {
                    producer.send(new ProducerRecord<>(topic, p, base + 1000L * i, null, "p" + p + "r" + i))
                            .get(30, TimeUnit.SECONDS);
                }
            }
            GroupConfigs.set(admin, group, Map.of("share.auto.offset.reset", "earliest"));
            admin.alterConsumerGroupOffsets(group + "-classic", Map.of(new TopicPartition(topic, 0),
                    new OffsetAndMetadata(1))).all().get(30, TimeUnit.SECONDS);
        }
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ConsumerConfig.GROUP_ID_CONFIG, group,
                "share.acknowledgement.mode", "explicit",
                ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName(),
                ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName()))) {
            consumer.subscribe(List.of(topic));
            Set<String> accepted = new TreeSet<>();
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (accepted.size() < 6) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("accepted " + accepted);
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    accepted.add(r.value());
                }
                consumer.commitSync();
            }
            Harness.out("holding", "accepted", new ArrayList<>(accepted));
            InputStream in = System.in;
            while (in.read() >= 0) { }  // until the test closes our standard input
        }
        Harness.out("end");
        System.out.flush();
        System.exit(0);
    }
}
