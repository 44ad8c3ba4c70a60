// Command samsa-compat-go runs one scenario of the differential compat suite with franz-go (kgo and
// kadm) against a broker and prints what the client observes, one JSON object per line.
//
//	samsa-compat-go <bootstrap> <scenario> <topic-prefix>
//
// Scenarios (compat/test_go_node_clients.py compares their output between Samsa and Apache Kafka):
//
//	produce-consume  default producer (idempotent, snappy-then-none) with keys, values, headers and
//	                 explicit timestamps, to a CreateTime topic and a LogAppendTime topic; consumed
//	                 back with assigned partitions from the start
//	group            a consumer group (kgo.ConsumerGroup + AutoCommitMarks, CommitUncommittedOffsets),
//	                 committed offsets and group descriptions through kadm, a second member resuming
//	admin            kadm: list offsets (start, end, after a millisecond), describe topics, create and
//	                 delete topics with their errors, broker metadata
//	apiversions      the broker's ApiVersions ranges (versions.go)
//	served           whether the broker serves each given key and version (versions.go)
//	versions         the version sweep: one API key pinned to each given version in turn
//	                 (`versions <prefix> <key> <v1,v2,...>`, versions.go)
//
// Exit status 0 when the scenario ran to the end; any unexpected error is printed to stderr with
// status 1. Broker error codes the scenario provokes on purpose are printed as observations.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

type obs map[string]any

var out = json.NewEncoder(os.Stdout)

// memberID is the random part of kgo's default commit metadata: the member id, "kgo-<uuid>" in a
// classic group, a base64 Kafka Uuid a KIP-848 member makes itself.
var memberID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|^[A-Za-z0-9_-]{22}==$`)

func emit(o obs) {
	if err := out.Encode(o); err != nil {
		fail("write: %v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func must(err error, what string) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

// errName is the Kafka error name of err ("" for nil); other errors are fatal.
func errName(err error) string {
	if err == nil {
		return ""
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	fail("unexpected non-Kafka error: %v", err)
	return ""
}

// ts is a record timestamp as observed: the millisecond for an explicit one, "broker-now" for a
// broker-assigned one close to the current time (it differs between any two runs).
func ts(t time.Time) any {
	ms := t.UnixMilli()
	if d := time.Now().UnixMilli() - ms; d > -600_000 && d < 600_000 {
		return "broker-now"
	}
	return ms
}

func text(b []byte) any {
	if b == nil {
		return nil
	}
	s := string(b)
	if len(s) > 20 {
		s = s[:20]
	}
	return s
}

func headers(hs []kgo.RecordHeader) [][]any {
	res := [][]any{}
	for _, h := range hs {
		res = append(res, []any{h.Key, text(h.Value)})
	}
	return res
}

func consumed(r *kgo.Record) obs {
	return obs{
		"step": "consumed", "topic": r.Topic, "partition": r.Partition, "offset": r.Offset,
		"key": text(r.Key), "value": text(r.Value), "valueLen": len(r.Value), "headers": headers(r.Headers),
		"timestamp": ts(r.Timestamp), "timestampType": r.Attrs.TimestampType(), "leaderEpoch": r.LeaderEpoch,
		// as stored by the broker: the producer's batch codec (0 none, 2 snappy) and producer id
		"compression": r.Attrs.CompressionType(), "idempotent": r.ProducerID >= 0, "producerEpoch": r.ProducerEpoch,
	}
}

func newClient(bootstrap string, opts ...kgo.Opt) *kgo.Client {
	base := append([]kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.FetchMaxWait(500 * time.Millisecond)}, securityOpts()...)
	cl, err := kgo.NewClient(append(base, opts...)...)
	must(err, "client")
	return cl
}

func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) {
	resp, err := adm.CreateTopics(ctx, partitions, 1, configs, topic)
	must(err, "create topics")
	r := resp[topic]
	emit(obs{"step": "create", "topic": topic, "err": errName(r.Err), "partitions": r.NumPartitions,
		"replicationFactor": r.ReplicationFactor, "hasId": r.ID != [16]byte{}})
}

// pollN polls until n records arrived (or the context ends) and returns them ordered by topic,
// partition, offset.
func pollN(ctx context.Context, cl *kgo.Client, n int) []*kgo.Record {
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			fail("timed out after %d of %d records", len(got), n)
		}
		fs.EachError(func(t string, p int32, err error) { fail("fetch %s/%d: %v", t, p, err) })
		got = append(got, fs.Records()...)
	}
	sortRecords(got)
	return got
}

func sortRecords(got []*kgo.Record) {
	sort.Slice(got, func(i, j int) bool {
		a, b := got[i], got[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Offset < b.Offset
	})
}

// produce sends recs in one ProduceSync (one batch per partition) and prints their offsets,
// ordered by topic, partition, offset (results arrive in completion order).
func produce(ctx context.Context, cl *kgo.Client, recs ...*kgo.Record) {
	var done []*kgo.Record
	for _, res := range cl.ProduceSync(ctx, recs...) {
		must(res.Err, "produce")
		done = append(done, res.Record)
	}
	sortRecords(done)
	for _, r := range done {
		emit(obs{"step": "produced", "topic": r.Topic, "partition": r.Partition, "offset": r.Offset,
			"timestamp": ts(r.Timestamp)})
	}
}

const base = int64(1_600_000_000_000) // explicit record timestamps: 2020-09-13

func scenarioProduceConsume(ctx context.Context, bootstrap, prefix string) {
	topic, lat := prefix+"-pc", prefix+"-lat"
	cl := newClient(bootstrap) // the default producer: idempotent, acks=all, snappy then none
	defer cl.Close()
	adm := kadm.NewClient(cl)
	createTopic(ctx, adm, topic, 1, nil)
	createTopic(ctx, adm, lat, 1, map[string]*string{"message.timestamp.type": kadm.StringPtr("LogAppendTime")})

	big := make([]byte, 3000)
	for i := range big {
		big[i] = byte('a' + i%7)
	}
	produce(ctx, cl,
		&kgo.Record{Topic: topic, Key: []byte("k0"), Value: []byte("v0"), Timestamp: time.UnixMilli(base),
			Headers: []kgo.RecordHeader{{Key: "h1", Value: []byte("a")}, {Key: "h2", Value: []byte{}}}},
		&kgo.Record{Topic: topic, Value: []byte("v1"), Timestamp: time.UnixMilli(base + 1)},
		&kgo.Record{Topic: topic, Key: []byte("k2"), Timestamp: time.UnixMilli(base - 5),
			Headers: []kgo.RecordHeader{{Key: "h", Value: nil}}},
		&kgo.Record{Topic: topic, Key: []byte("k3"), Value: big, Timestamp: time.UnixMilli(base + 2)},
	)
	// a second batch on the same producer id (sequence continues)
	produce(ctx, cl, &kgo.Record{Topic: topic, Key: []byte("k4"), Value: []byte("v4"), Timestamp: time.UnixMilli(base + 3)})
	produce(ctx, cl,
		&kgo.Record{Topic: lat, Key: []byte("l0"), Value: []byte("x"), Timestamp: time.UnixMilli(base)},
		&kgo.Record{Topic: lat, Key: []byte("l1"), Value: []byte("y"), Timestamp: time.UnixMilli(base + 1)},
	)

	reader := newClient(bootstrap, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()},
		lat:   {0: kgo.NewOffset().AtStart()},
	}))
	defer reader.Close()
	for _, r := range pollN(ctx, reader, 7) {
		emit(consumed(r))
	}
}

func describeGroup(ctx context.Context, adm *kadm.Client, group, step string) {
	gs, err := adm.DescribeGroups(ctx, group)
	must(err, "describe groups")
	g := gs[group]
	assigned := []string{}
	for _, m := range g.Members {
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				for _, p := range t.Partitions {
					assigned = append(assigned, fmt.Sprintf("%s/%d", t.Topic, p))
				}
			}
		}
	}
	sort.Strings(assigned)
	emit(obs{"step": step, "err": errName(g.Err), "state": g.State, "protocolType": g.ProtocolType,
		"protocol": g.Protocol, "members": len(g.Members), "assigned": assigned})
}

func committed(ctx context.Context, adm *kadm.Client, group, step string) {
	os, err := adm.FetchOffsets(ctx, group)
	must(err, "fetch offsets")
	var rows []obs
	os.Each(func(o kadm.OffsetResponse) {
		rows = append(rows, obs{"step": step, "topic": o.Topic, "partition": o.Partition, "offset": o.At,
			"leaderEpoch": o.LeaderEpoch, "metadata": memberID.ReplaceAllString(o.Metadata, "<member-id>"), "err": errName(o.Err)})
	})
	sort.Slice(rows, func(i, j int) bool { return rows[i]["partition"].(int32) < rows[j]["partition"].(int32) })
	for _, r := range rows {
		emit(r)
	}
}

func groupMember(ctx context.Context, bootstrap, topic, group string, n int, adm *kadm.Client, describe bool) {
	cl := newClient(bootstrap,
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.AutoCommitMarks(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.BlockRebalanceOnPoll(),
	)
	recs := pollN(ctx, cl, n)
	for _, r := range recs {
		emit(consumed(r))
	}
	cl.MarkCommitRecords(recs...)
	must(cl.CommitUncommittedOffsets(ctx), "commit")
	cl.AllowRebalance()
	if describe {
		describeGroup(ctx, adm, group, "described-active")
	}
	cl.Close() // leaves the group
}

func scenarioGroup(ctx context.Context, bootstrap, prefix string) {
	topic, group := prefix+"-grp", prefix+"-g"
	cl := newClient(bootstrap, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	adm := kadm.NewClient(cl)
	createTopic(ctx, adm, topic, 2, nil)
	var recs []*kgo.Record
	for i := 0; i < 6; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: []byte(fmt.Sprintf("g%d", i)),
			Value: []byte(fmt.Sprintf("first-%d", i)), Timestamp: time.UnixMilli(base + int64(i))})
	}
	produce(ctx, cl, recs...)

	groupMember(ctx, bootstrap, topic, group, 6, adm, true)
	committed(ctx, adm, group, "committed")
	describeGroup(ctx, adm, group, "described-left")

	produce(ctx, cl,
		&kgo.Record{Topic: topic, Partition: 0, Key: []byte("g6"), Value: []byte("second-6"), Timestamp: time.UnixMilli(base + 6)},
		&kgo.Record{Topic: topic, Partition: 1, Key: []byte("g7"), Value: []byte("second-7"), Timestamp: time.UnixMilli(base + 7)},
	)
	groupMember(ctx, bootstrap, topic, group, 2, adm, false) // resumes from the commits: only the new two
	committed(ctx, adm, group, "committed-again")
}

func listed(step string, lo kadm.ListedOffsets) {
	var rows []obs
	lo.Each(func(o kadm.ListedOffset) {
		rows = append(rows, obs{"step": step, "topic": o.Topic, "partition": o.Partition, "offset": o.Offset,
			"timestamp": o.Timestamp, "leaderEpoch": o.LeaderEpoch, "err": errName(o.Err)})
	})
	sort.Slice(rows, func(i, j int) bool { return rows[i]["partition"].(int32) < rows[j]["partition"].(int32) })
	for _, r := range rows {
		emit(r)
	}
}

func scenarioAdmin(ctx context.Context, bootstrap, prefix string) {
	topic, missing, doomed := prefix+"-adm", prefix+"-missing", prefix+"-doomed"
	cl := newClient(bootstrap, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	adm := kadm.NewClient(cl)
	createTopic(ctx, adm, topic, 3, nil)
	createTopic(ctx, adm, topic, 3, nil)              // TOPIC_ALREADY_EXISTS
	createTopic(ctx, adm, prefix+"-zero", 0, nil)     // INVALID_PARTITIONS
	createTopic(ctx, adm, prefix+"bad name!", 1, nil) // INVALID_TOPIC_EXCEPTION
	createTopic(ctx, adm, doomed, 1, nil)

	produce(ctx, cl,
		&kgo.Record{Topic: topic, Partition: 0, Value: []byte("a"), Timestamp: time.UnixMilli(base + 1000)},
		&kgo.Record{Topic: topic, Partition: 0, Value: []byte("b"), Timestamp: time.UnixMilli(base + 2000)},
		&kgo.Record{Topic: topic, Partition: 0, Value: []byte("c"), Timestamp: time.UnixMilli(base + 3000)},
		&kgo.Record{Topic: topic, Partition: 1, Value: []byte("d"), Timestamp: time.UnixMilli(base + 500)},
	)

	start, err := adm.ListStartOffsets(ctx, topic)
	must(err, "list start offsets")
	listed("start", start)
	end, err := adm.ListEndOffsets(ctx, topic)
	must(err, "list end offsets")
	listed("end", end)
	after, err := adm.ListOffsetsAfterMilli(ctx, base+1500, topic)
	must(err, "list offsets after milli")
	listed("after-1500", after)
	future, err := adm.ListOffsetsAfterMilli(ctx, base+10_000_000, topic)
	must(err, "list offsets after milli (future)")
	listed("after-future", future)

	details, err := adm.ListTopics(ctx, topic, missing)
	must(err, "list topics")
	for _, name := range []string{topic, missing} {
		d, ok := details[name]
		o := obs{"step": "described-topic", "topic": name, "present": ok}
		if ok {
			o["err"] = errName(d.Err)
			o["internal"] = d.IsInternal
			o["partitions"] = len(d.Partitions)
			var parts []string
			for _, p := range d.Partitions.Sorted() {
				parts = append(parts, fmt.Sprintf("p%d leader=%d epoch=%d replicas=%v isr=%v offline=%v err=%s",
					p.Partition, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, p.OfflineReplicas, errName(p.Err)))
			}
			o["details"] = parts
		}
		emit(o)
	}

	deleted, err := adm.DeleteTopics(ctx, doomed, missing)
	must(err, "delete topics")
	for _, name := range []string{doomed, missing} {
		emit(obs{"step": "deleted", "topic": name, "err": errName(deleted[name].Err)})
	}

	md, err := adm.BrokerMetadata(ctx)
	must(err, "broker metadata")
	var brokers []string
	for _, b := range md.Brokers {
		rack := ""
		if b.Rack != nil {
			rack = *b.Rack
		}
		brokers = append(brokers, fmt.Sprintf("%d %s rack=%q", b.NodeID, b.Host, rack))
	}
	emit(obs{"step": "metadata", "hasCluster": md.Cluster != "", "controller": md.Controller, "brokers": brokers})
}

func main() {
	if len(os.Args) < 4 {
		fail("usage: %s <bootstrap> <scenario> <topic-prefix> [scenario arguments]", os.Args[0])
	}
	bootstrap, scenario, prefix := os.Args[1], os.Args[2], os.Args[3]
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	switch scenario {
	case "produce-consume":
		scenarioProduceConsume(ctx, bootstrap, prefix)
	case "group":
		scenarioGroup(ctx, bootstrap, prefix)
	case "admin":
		scenarioAdmin(ctx, bootstrap, prefix)
	case "apiversions":
		scenarioApiVersions(ctx, bootstrap)
	case "versions":
		scenarioVersions(ctx, bootstrap, prefix, os.Args[4:])
	case "served":
		scenarioServed(ctx, bootstrap, os.Args[4:])
	default:
		fail("unknown scenario %q", scenario)
	}
	emit(obs{"step": "done"})
}
