// Whether Apache Kafka accepts a broker config, by its own KafkaConfig (whose constructor builds
// GroupCoordinatorConfig and ShareGroupConfig and runs their require(...) checks, as a starting
// broker and `kafka-storage format` do), for compat/test_group_coordinator_configs.py. One JSON
// line per argument, a case: `name=value;name=value` over a minimal KRaft combined node's
// properties; "error" is the refusal's message, or null when KafkaConfig accepts the case.
//
//   java -cp <kafka broker classpath>:<compiled> BrokerConfigCheck <case> ...

import java.util.Properties;

import kafka.server.KafkaConfig;

public class BrokerConfigCheck {
    public static void main(String[] args) {
        for (int i = 0; i < args.length; i++) {
            Properties props = new Properties();
            props.put("process.roles", "broker,controller");
            props.put("node.id", "1");
            props.put("controller.quorum.voters", "1@127.0.0.1:9093");
            props.put("listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093");
            props.put("controller.listener.names", "CONTROLLER");
            props.put("log.dirs", "/nonexistent");
            for (String kv : args[i].split(";")) {
                if (kv.isEmpty()) continue;
                int eq = kv.indexOf('=');
                props.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
            String error = null;
            try {
                new KafkaConfig(props);
            } catch (RuntimeException e) {
                error = e.getMessage();
            }
            Harness.out("case", "index", i, "error", error);
        }
        Harness.out("end");
    }
}
