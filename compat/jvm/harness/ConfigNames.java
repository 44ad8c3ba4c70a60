// The config names a Kafka broker accepts, read from its own classes: the topic configs
// (LogConfig.configKeys), the broker configs (KafkaConfig.configDef) and the broker configs it can
// change at runtime (DynamicBrokerConfig's set), each with whether its documentation calls it
// deprecated. Run on Kafka 3.9's and 4.x's broker classpaths (compat/target/kafka-3.9, kafka) by
// compat/test_config_names.py; by reflection, so it compiles with the client harness.
//
//   java -cp <kafka classpath>:<compiled> ConfigNames

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

public class ConfigNames {
    public static void main(String[] args) throws Exception {
        Harness.out("start", "kafkaVersion", Class.forName("org.apache.kafka.common.utils.AppInfoParser")
                .getMethod("getVersion").invoke(null));
        Map<?, ?> topicKeys = (Map<?, ?>) Class.forName("org.apache.kafka.storage.internals.log.LogConfig")
                .getMethod("configKeys").invoke(null);
        Harness.out("topic", "configs", describe(topicKeys));
        Object configDef = Class.forName("kafka.server.KafkaConfig").getMethod("configDef").invoke(null);
        Map<?, ?> brokerKeys = (Map<?, ?>) configDef.getClass().getMethod("configKeys").invoke(configDef);
        Harness.out("broker", "configs", describe(brokerKeys));
        Harness.out("dynamic", "names", new ArrayList<>(new TreeSet<>(dynamicConfigs())));
        Harness.out("end");
    }

    /** name -> "deprecated" or "" for each ConfigKey, by its documentation. */
    static Map<String, String> describe(Map<?, ?> keys) throws Exception {
        Map<String, String> out = new TreeMap<>();
        for (Map.Entry<?, ?> e : keys.entrySet()) {
            Object key = e.getValue();
            Object doc = key.getClass().getField("documentation").get(key);
            boolean deprecated = doc != null && doc.toString().toLowerCase().contains("deprecated");
            out.put(e.getKey().toString(), deprecated ? "deprecated" : "");
        }
        return out;
    }

    /** Kafka 4.x: DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS (Java); 3.x: the Scala object's AllDynamicConfigs. */
    static Collection<String> dynamicConfigs() throws Exception {
        List<String> names = new ArrayList<>();
        try {
            Class<?> c = Class.forName("org.apache.kafka.server.config.DynamicBrokerConfig");
            for (Object n : (Collection<?>) c.getField("ALL_DYNAMIC_CONFIGS").get(null)) names.add(n.toString());
        } catch (ClassNotFoundException | NoSuchFieldException e) {
            Class<?> c = Class.forName("kafka.server.DynamicBrokerConfig");
            Method all = c.getMethod("AllDynamicConfigs");
            Object set = all.invoke(null);
            Object it = set.getClass().getMethod("iterator").invoke(set);
            Method hasNext = it.getClass().getMethod("hasNext");
            Method next = it.getClass().getMethod("next");
            hasNext.setAccessible(true);
            next.setAccessible(true);
            while ((Boolean) hasNext.invoke(it)) names.add(next.invoke(it).toString());
        }
        return names;
    }
}
