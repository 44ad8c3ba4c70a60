// A group's configs (the GROUP config resource, Kafka 4.x), set with incrementalAlterConfigs and
// then read back: Kafka's broker learns a group's configs from its controller a moment after the
// alter is answered, and a share consumer joining before that would start where the old
// share.auto.offset.reset says (the latest offset).

import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.config.ConfigResource;

final class GroupConfigs {
    private GroupConfigs() {}

    static void set(Admin admin, String group, Map<String, String> configs) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        List<AlterConfigOp> ops = new ArrayList<>();
        configs.forEach((name, value) -> ops.add(new AlterConfigOp(new ConfigEntry(name, value), AlterConfigOp.OpType.SET)));
        admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get(30, TimeUnit.SECONDS);
        long deadline = System.currentTimeMillis() + 10_000;
        while (!readBack(admin, resource, configs)) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("group config not seen");
            Thread.sleep(100);
        }
    }

    private static boolean readBack(Admin admin, ConfigResource resource, Map<String, String> configs) throws Exception {
        Config described = admin.describeConfigs(List.of(resource)).all().get(30, TimeUnit.SECONDS).get(resource);
        for (Map.Entry<String, String> e : configs.entrySet()) {
            ConfigEntry entry = described.get(e.getKey());
            if (entry == null || !e.getValue().equals(entry.value())) return false;
        }
        return true;
    }
}
