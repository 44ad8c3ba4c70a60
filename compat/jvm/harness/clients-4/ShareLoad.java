// Share consumption under faults, for tests/cluster/test_share_failover.py: KafkaShareConsumers
// (kafka-clients 4.x) in explicit acknowledgement mode accept every record they get and report it,
// one JSON object per line, until the test closes their standard input.
//
//   java -cp <clients classpath>:<compiled> ShareLoad <bootstrap> <topic> <group> <consumers>
//
// First the group's share.auto.offset.reset is set to earliest (incrementalAlterConfigs on the
// GROUP resource) and read back, then {"step":"configured"}. Each consumer runs on its own thread:
// every record it is delivered is printed as {"step":"delivered","c","p","o","dc","t"} and
// acknowledged ACCEPT; after each poll commitSync sends the acknowledgements and
// {"step":"accepted","c","p","o":[offsets],"t"} lists the records whose partition answered without
// error ({"step":"ackfailed",...,"error"} the others: they are not accepted). "t" is the wall clock
// in milliseconds. When standard input closes, the consumers close and {"step":"end"} follows.

import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ShareLoad {
    static final AtomicBoolean stopping = new AtomicBoolean();

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int consumers = Integer.parseInt(args[3]);
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            GroupConfigs.set(admin, group, Map.of("share.auto.offset.reset", "earliest"));
        }
        Harness.out("configured");
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < consumers; i++) {
            String name = "c" + i;
            Thread t = new Thread(() -> consume(bootstrap, topic, group, name), name);
            t.start();
            threads.add(t);
        }
        while (System.in.read() >= 0) { }  // until the test closes standard input
        stopping.set(true);
        for (Thread t : threads) t.join(30_000);
        Harness.out("end");
        System.out.flush();
        System.exit(0);
    }

    static void consume(String bootstrap, String topic, String group, String name) {
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ConsumerConfig.GROUP_ID_CONFIG, group,
                ConsumerConfig.CLIENT_ID_CONFIG, name,
                "share.acknowledgement.mode", "explicit",
                ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50",
                ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName(),
                ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName()))) {
            c.subscribe(List.of(topic));
            while (!stopping.get()) {
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = c.poll(Duration.ofMillis(100));
                } catch (KafkaException e) {
                    Harness.out("pollfailed", "c", name, "error", String.valueOf(e));
                    continue;
                }
                Map<Integer, List<Long>> polled = new TreeMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    Harness.out("delivered", "c", name, "p", r.partition(), "o", r.offset(),
                            "dc", r.deliveryCount().map(Short::intValue).orElse(-1), "t", System.currentTimeMillis());
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                    polled.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.offset());
                }
                if (polled.isEmpty()) continue;
                Map<Integer, String> errors = new HashMap<>();
                for (Integer p : polled.keySet()) errors.put(p, "no answer");  // until one comes
                try {
                    for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e
                            : c.commitSync(Duration.ofSeconds(20)).entrySet()) {
                        if (e.getValue().isPresent()) errors.put(e.getKey().partition(), String.valueOf(e.getValue().get()));
                        else errors.remove(e.getKey().partition());
                    }
                } catch (KafkaException e) {
                    for (Integer p : polled.keySet()) errors.put(p, String.valueOf(e));
                }
                long now = System.currentTimeMillis();
                for (Map.Entry<Integer, List<Long>> e : polled.entrySet()) {
                    String error = errors.get(e.getKey());
                    if (error == null) Harness.out("accepted", "c", name, "p", e.getKey(), "o", e.getValue(), "t", now);
                    else Harness.out("ackfailed", "c", name, "p", e.getKey(), "o", e.getValue(), "error", error, "t", now);
                }
            }
            c.close(Duration.ofSeconds(10));
        } catch (Exception e) {
            Harness.out("consumerfailed", "c", name, "error", String.valueOf(e));
        }
    }
}
