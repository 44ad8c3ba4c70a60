// KIP-932 share groups through kafka-clients 4.x's KafkaShareConsumer, for the differential suite:
// what the consumers observe, one JSON object per line.
//
//   java -cp <clients classpath>:<compiled> ShareHarness <bootstrap> <prefix>
//
// One topic of one partition and one share group, whose share.auto.offset.reset=earliest and
// share.delivery.count.limit=2 are set with the AdminClient (incrementalAlterConfigs on the GROUP
// resource). Six records, each its own batch: two consumers in explicit acknowledgement mode
// share them, accepting r0-r3, releasing r4 each time (delivered again until the delivery limit
// archives it) and rejecting r5 (archived at once). Then the two close, three more records come,
// a third consumer acquires them and closes without acknowledging (its records are released),
// and a fourth gets them again with their delivery count raised and accepts them. Printed: which
// records were accepted (and how often), the delivery counts each of r4, r5 and r6-r8 were seen
// with, and that nothing else comes afterwards.

import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareHarness {
    static final long DEADLINE_MS = 60_000;
    static final Duration POLL = Duration.ofMillis(100);
    static String bootstrap;
    static String topic;
    static String group;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        topic = args[1] + "-t";
        group = args[1] + "-g";
        Harness.out("start", "clientVersion", Harness.AppInfoVersion.get());
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap));
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(Map.of(
                     ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                     ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName(),
                     ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName()))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
            GroupConfigs.set(admin, group, Map.of("share.auto.offset.reset", "earliest", "share.delivery.count.limit", "2"));
            for (int i = 0; i < 6; i++) produce(producer, "r" + i);

            // two consumers share r0-r5: accept r0-r3, release r4 until archived, reject r5
            Map<String, Integer> accepted = new TreeMap<>();
            Map<String, List<Integer>> seen = new TreeMap<>();
            List<KafkaShareConsumer<String, String>> pair = List.of(consumer(), consumer());
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (accepted.size() < 4 || seen.getOrDefault("r4", List.of()).size() < 2
                    || !seen.containsKey("r5")) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("first records: " + seen);
                for (KafkaShareConsumer<String, String> c : pair) {
                    for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                        seen.computeIfAbsent(r.value(), k -> new ArrayList<>()).add(count(r));
                        AcknowledgeType type = r.value().equals("r4") ? AcknowledgeType.RELEASE
                                : r.value().equals("r5") ? AcknowledgeType.REJECT : AcknowledgeType.ACCEPT;
                        if (type == AcknowledgeType.ACCEPT) accepted.merge(r.value(), 1, Integer::sum);
                        c.acknowledge(r, type);
                    }
                    c.commitSync();
                }
            }
            for (int i = 0; i < 10; i++) {  // r4 was archived at the delivery limit, r5 when rejected
                for (KafkaShareConsumer<String, String> c : pair) {
                    for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                        seen.computeIfAbsent(r.value(), k -> new ArrayList<>()).add(count(r));
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                    c.commitSync();
                }
            }
            for (KafkaShareConsumer<String, String> c : pair) c.close(Duration.ofSeconds(10));
            Harness.out("shared", "accepted", accepted, "r4", seen.get("r4"), "r5", seen.get("r5"),
                    "others", seen.keySet().stream().filter(v -> !v.matches("r[45]")).toList());

            // a consumer closes while holding records: they go to the next one, delivered again
            for (int i = 6; i < 9; i++) produce(producer, "r" + i);
            List<Integer> held = new ArrayList<>();
            try (KafkaShareConsumer<String, String> c = consumer()) {
                deadline = System.currentTimeMillis() + DEADLINE_MS;
                while (held.isEmpty()) {
                    if (System.currentTimeMillis() > deadline) throw new IllegalStateException("no records held");
                    for (ConsumerRecord<String, String> r : c.poll(POLL)) held.add(count(r));
                }
            }  // closed without acknowledging them
            Map<String, Integer> again = new TreeMap<>();
            try (KafkaShareConsumer<String, String> c = consumer()) {
                deadline = System.currentTimeMillis() + DEADLINE_MS;
                while (again.size() < held.size()) {
                    if (System.currentTimeMillis() > deadline) throw new IllegalStateException("redelivered: " + again);
                    for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                        again.put(r.value(), count(r));
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                    c.commitSync();
                }
            }
            Harness.out("redelivered", "held", held, "again", again);
        }
        Harness.out("end");
        System.out.flush();
        System.exit(0);
    }

    static int count(ConsumerRecord<String, String> r) {
        return r.deliveryCount().map(Short::intValue).orElse(-1);
    }

    static void produce(KafkaProducer<byte[], byte[]> producer, String value) throws Exception {
        producer.send(new ProducerRecord<>(topic, value.getBytes())).get(30, TimeUnit.SECONDS);  // a batch each
    }

    static KafkaShareConsumer<String, String> consumer() {
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ConsumerConfig.GROUP_ID_CONFIG, group,
                "share.acknowledgement.mode", "explicit",
                ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName(),
                ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName()));
        c.subscribe(List.of(topic));
        return c;
    }
}
