// Over 700 lines: one case per API key, each driving the franz-go API that sends it.
// The version sweep: every version of an API key, each sent by franz-go's ordinary API for it.
//
//	samsa-compat-go <bootstrap> versions <prefix> <key> <v1,v2,...>
//	samsa-compat-go <bootstrap> apiversions -
//	samsa-compat-go <bootstrap> served - <key>:<v1,v2,...> ...
//
// For each given version v of the API key, one run pins the key to exactly v (kgo.MaxVersions and
// kgo.MinVersions: the client sends v or fails, it never negotiates another version) and drives
// the client API that uses the key: the producer for Produce, the consumer for Fetch, the group
// consumer for JoinGroup/SyncGroup/Heartbeat/LeaveGroup/OffsetCommit/OffsetFetch/FindCoordinator,
// the idempotent producer for InitProducerId, connection set-up for ApiVersions, kadm for the
// admin APIs (kmsg requests through the client where kadm has no helper: DescribeCluster,
// DescribeTopicPartitions). Every other key keeps its default (the highest version both sides
// support). Set-up and read-back use a client with default versions, so what is observed is what
// the pinned version did: records round-trip with what that version carries, commits read back,
// configs read back after altering, and so on.
//
// The runs of one invocation go concurrently, each on its own topics and groups
// (<prefix>-v<version>-...); their observations are printed in version order, each with "v".
// Each run ends with {"step": "pinned", "sent": true} when the pinned client wrote at least one
// request of the key (a kgo write hook counts them). `apiversions` prints the broker's advertised
// range of every key and `served` whether it actually serves given versions, which
// compat/test_go_versions.py uses to split the sweep between the versions both targets serve
// (compared) and those only Samsa still serves (Samsa alone). COMPAT_GO_DEBUG=1 logs kgo's debug
// output on stderr.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func scenarioApiVersions(ctx context.Context, bootstrap string) {
	cl := newClient(bootstrap)
	defer cl.Close()
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	must(err, "api versions")
	for _, b := range vs {
		must(b.Err, "api versions")
		b.EachKeySorted(func(key, min, max int16) {
			emit(obs{"step": "api", "key": key, "min": min, "max": max})
		})
		return // one broker
	}
}

// scenarioServed asks whether the broker serves each given (key, version): the key's request
// with default (empty) fields, pinned to the version, sent once to the seed broker. A broker that
// does not serve a version closes the connection (Kafka 4.x advertises Produce v0-2 for
// librdkafka's sake but rejects them, KIP-896 and KAFKA-18659), so an advertised range alone
// does not say what can be compared. Arguments: <key>:<v1,v2,...> ...
func scenarioServed(ctx context.Context, bootstrap string, args []string) {
	type probe struct {
		key, v int16
		err    error
	}
	var probes []*probe
	for _, a := range args {
		k, vs, ok := strings.Cut(a, ":")
		key, err := strconv.Atoi(k)
		if !ok || err != nil {
			fail("bad probe %q", a)
		}
		for _, s := range strings.Split(vs, ",") {
			v, err := strconv.Atoi(s)
			must(err, "version")
			probes = append(probes, &probe{key: int16(key), v: int16(v)})
		}
	}
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, p := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := &run{ctx: ctx, bootstrap: bootstrap, key: p.key, v: p.v}
			defer r.closeAll()
			cl := r.pinned(kgo.RequestRetries(0))
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, p.err = cl.SeedBrokers()[0].Request(pctx, probeRequest(p.key))
		}()
	}
	wg.Wait()
	for _, p := range probes {
		o := obs{"step": "served", "key": p.key, "v": p.v, "served": p.err == nil}
		if p.err != nil {
			o["err"] = p.err.Error()
		}
		emit(o)
	}
}

// sweeps: the run for each API key.
var sweeps = map[int16]func(r *run){
	0:  sweepProduce,
	1:  sweepFetch,
	2:  sweepListOffsets,
	3:  sweepMetadata,
	8:  sweepGroup, // OffsetCommit
	9:  sweepGroup, // OffsetFetch
	10: sweepGroup, // FindCoordinator
	11: sweepGroup, // JoinGroup
	12: sweepGroup, // Heartbeat
	13: sweepGroup, // LeaveGroup
	14: sweepGroup, // SyncGroup
	15: sweepGroupAdmin,
	16: sweepGroupAdmin,
	18: sweepApiVersions,
	19: sweepCreateTopics,
	20: sweepDeleteTopics,
	21: sweepDeleteRecords,
	22: sweepInitProducerID,
	23: sweepOffsetForLeaderEpoch,
	32: sweepDescribeConfigs,
	33: sweepAlterConfigs,
	34: sweepAlterReplicaLogDirs,
	35: sweepDescribeLogDirs,
	37: sweepCreatePartitions,
	42: sweepDeleteGroups,
	43: sweepElectLeaders,
	44: sweepIncrementalAlterConfigs,
	45: sweepReassignments, // AlterPartitionReassignments
	46: sweepReassignments, // ListPartitionReassignments
	47: sweepOffsetDelete,
	48: sweepClientQuotas, // DescribeClientQuotas
	49: sweepClientQuotas, // AlterClientQuotas
	60: sweepDescribeCluster,
	68: sweepConsumerProtocol, // ConsumerGroupHeartbeat
	69: sweepConsumerProtocol, // ConsumerGroupDescribe
	74: sweepListConfigResources,
	75: sweepDescribeTopicPartitions,
	76: sweepShare,        // ShareGroupHeartbeat
	77: sweepShare,        // ShareGroupDescribe
	78: sweepShare,        // ShareFetch
	79: sweepShare,        // ShareAcknowledge
	90: sweepShareOffsets, // DescribeShareGroupOffsets
	91: sweepShareOffsets, // AlterShareGroupOffsets
	92: sweepShareOffsets, // DeleteShareGroupOffsets
}

func scenarioVersions(ctx context.Context, bootstrap, prefix string, args []string) {
	if len(args) != 2 {
		fail("usage: versions <prefix> <key> <v1,v2,...>")
	}
	k, err := strconv.Atoi(args[0])
	must(err, "key")
	key := int16(k)
	sweep, ok := sweeps[key]
	if !ok {
		fail("no sweep for API key %d", key)
	}
	var runs []*run
	for _, s := range strings.Split(args[1], ",") {
		v, err := strconv.Atoi(s)
		must(err, "version")
		runs = append(runs, &run{ctx: ctx, bootstrap: bootstrap, key: key, v: int16(v),
			prefix: fmt.Sprintf("%s-v%d", prefix, v)})
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.closeAll()
			sweep(r)
			r.emit(obs{"step": "pinned", "key": r.key, "sent": r.sent.Load() > 0})
		}()
	}
	wg.Wait()
	for _, r := range runs {
		for _, o := range r.obs {
			emit(o)
		}
	}
}

// run is one (key, version) of the sweep.
type run struct {
	ctx       context.Context
	bootstrap string
	key, v    int16
	prefix    string
	obs       []obs
	sent      atomic.Int64 // requests of the pinned key the pinned clients wrote
	mu        sync.Mutex
	clients   []*kgo.Client
}

func (r *run) emit(o obs) {
	o["v"] = r.v
	r.obs = append(r.obs, o)
}

// fail ends the program with the run's observations so far on stderr.
func (r *run) fail(format string, args ...any) {
	for _, o := range r.obs {
		b, _ := json.Marshal(o)
		fmt.Fprintf(os.Stderr, "%s\n", b)
	}
	fail("key %d v%d: "+format, append([]any{r.key, r.v}, args...)...)
}

func (r *run) must(err error, what string) {
	if err != nil {
		r.fail("%s: %v", what, err)
	}
}

func (r *run) name(s string) string { return r.prefix + "-" + s }

// OnBrokerWrite counts the pinned key's requests (kgo.HookBrokerWrite).
func (r *run) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == r.key && err == nil {
		r.sent.Add(1)
	}
}

func (r *run) client(opts ...kgo.Opt) *kgo.Client {
	base := []kgo.Opt{kgo.SeedBrokers(r.bootstrap), kgo.FetchMaxWait(500 * time.Millisecond), kgo.MetadataMinAge(250 * time.Millisecond)}
	if os.Getenv("COMPAT_GO_DEBUG") != "" { // kgo's debug log on stderr
		base = append(base, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug,
			func() string { return fmt.Sprintf("[key %d v%d] ", r.key, r.v) })))
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	r.must(err, "client")
	r.mu.Lock()
	r.clients = append(r.clients, cl)
	r.mu.Unlock()
	return cl
}

// pinned is a client that sends the run's key at exactly its version.
func (r *run) pinned(opts ...kgo.Opt) *kgo.Client {
	maxs := kversion.Stable()
	maxs.SetMaxKeyVersion(r.key, r.v)
	mins := new(kversion.Versions)
	mins.SetMaxKeyVersion(r.key, r.v)
	return r.client(append([]kgo.Opt{kgo.MaxVersions(maxs), kgo.MinVersions(mins), kgo.WithHooks(r)}, opts...)...)
}

// plain is a client with default versions, for set-up and read-back.
func (r *run) plain(opts ...kgo.Opt) *kgo.Client { return r.client(opts...) }

func (r *run) closeAll() {
	for _, cl := range r.clients {
		cl.Close()
	}
}

func (r *run) admin() *kadm.Client { return kadm.NewClient(r.plain()) }

// topic creates a topic for the run with default versions; it must succeed.
func (r *run) topic(suffix string, partitions int32, configs map[string]*string) string {
	t := r.name(suffix)
	resp, err := r.admin().CreateTopics(r.ctx, partitions, 1, configs, t)
	r.must(err, "create topic")
	r.must(resp[t].Err, "create topic "+t)
	r.waitTopics(true, t)
	return t
}

// waitTopics polls Metadata (default versions, no auto-creation, no client cache) until every
// topic exists with a leader for each partition, or until none exists: a Kafka broker learns of
// a topic change from its controller a moment after the admin call returned, so what comes next
// would otherwise race with it. It fails the run after 15 s.
func (r *run) waitTopics(exist bool, topics ...string) {
	cl := r.plain()
	deadline := time.Now().Add(15 * time.Second)
	for {
		req := kmsg.NewPtrMetadataRequest()
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(r.ctx, cl)
		r.must(err, "metadata")
		done := len(resp.Topics) == len(topics)
		for _, t := range resp.Topics {
			ready := t.ErrorCode == 0 && len(t.Partitions) > 0
			for _, p := range t.Partitions {
				ready = ready && p.ErrorCode == 0 && p.Leader >= 0
			}
			gone := t.ErrorCode == kerr.UnknownTopicOrPartition.Code
			done = done && (exist && ready || !exist && gone)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			r.fail("topics %v: not %s after 15 s", topics, map[bool]string{true: "ready", false: "gone"}[exist])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// produce sends recs in one ProduceSync and emits their offsets in topic/partition/offset order.
func (r *run) produce(cl *kgo.Client, step string, recs ...*kgo.Record) {
	var done []*kgo.Record
	for _, res := range cl.ProduceSync(r.ctx, recs...) {
		r.must(res.Err, "produce")
		done = append(done, res.Record)
	}
	sortRecords(done)
	for _, rec := range done {
		r.emit(obs{"step": step, "partition": rec.Partition, "offset": rec.Offset})
	}
}

// consume polls cl until n records arrived and emits them in partition/offset order.
func (r *run) consume(step string, n int, cl *kgo.Client) []*kgo.Record {
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			r.fail("%s: timed out after %d of %d records", step, len(recs), n)
		}
		fs.EachError(func(t string, p int32, err error) { r.fail("%s: fetch %s/%d: %v", step, t, p, err) })
		recs = append(recs, fs.Records()...)
	}
	sortRecords(recs)
	for _, rec := range recs {
		o := consumed(rec)
		o["step"] = step
		delete(o, "topic")
		r.emit(o)
	}
	return recs
}

func assign(topic string, partitions int32, at kgo.Offset) kgo.Opt {
	ps := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		ps[p] = at
	}
	return kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: ps})
}

func rec(topic string, partition int32, key, value string, ms int64, hs ...kgo.RecordHeader) *kgo.Record {
	r := &kgo.Record{Topic: topic, Partition: partition, Timestamp: time.UnixMilli(ms), Headers: hs}
	if key != "" {
		r.Key = []byte(key)
	}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

// records: keys, a null key, a null value, headers (one with a null value), a compressible
// 3000-byte value, explicit timestamps (one earlier than its predecessor).
func records(topic string) []*kgo.Record {
	big := make([]byte, 3000)
	for i := range big {
		big[i] = byte('a' + i%7)
	}
	return []*kgo.Record{
		rec(topic, 0, "k0", "v0", base, kgo.RecordHeader{Key: "h1", Value: []byte("a")}, kgo.RecordHeader{Key: "h2", Value: []byte{}}),
		rec(topic, 0, "", "v1", base+1),
		rec(topic, 0, "k2", "", base-5, kgo.RecordHeader{Key: "h", Value: nil}),
		{Topic: topic, Key: []byte("k3"), Value: big, Timestamp: time.UnixMilli(base + 2)},
	}
}

var manual = kgo.RecordPartitioner(kgo.ManualPartitioner())

// ------------------------------------------------------------------------------ produce, fetch

// Produce: the producer pinned to v (v0-1 carry message format 0: no timestamps, v2 format 1:
// no headers, and neither can be idempotent); records read back with default versions.
func sweepProduce(r *run) {
	topic := r.topic("p", 1, nil)
	opts := []kgo.Opt{manual}
	if r.v < 3 {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl := r.pinned(opts...)
	r.produce(cl, "produced", records(topic)...)
	r.produce(cl, "produced", rec(topic, 0, "k4", "v4", base+3)) // a second batch: sequence continues
	r.consume("consumed", 5, r.plain(assign(topic, 1, kgo.NewOffset().AtStart())))
}

// Fetch: records produced with default versions, consumed by a consumer pinned to v, from the
// start and from inside the first batch, read_uncommitted and read_committed.
func sweepFetch(r *run) {
	topic := r.topic("f", 1, nil)
	prod := r.plain(manual)
	r.produce(prod, "produced", records(topic)...)
	r.produce(prod, "produced", rec(topic, 0, "k4", "v4", base+3))
	r.consume("consumed", 5, r.pinned(assign(topic, 1, kgo.NewOffset().AtStart())))
	r.consume("consumed-from-2", 3, r.pinned(assign(topic, 1, kgo.NewOffset().At(2)),
		kgo.FetchIsolationLevel(kgo.ReadCommitted())))
}

// InitProducerId: the default (idempotent) producer with InitProducerId pinned to v.
func sweepInitProducerID(r *run) {
	topic := r.topic("ipi", 1, nil)
	cl := r.pinned(manual)
	r.produce(cl, "produced", records(topic)[:2]...)
	r.produce(cl, "produced", rec(topic, 0, "k2", "v2", base+2))
	r.consume("consumed", 3, r.plain(assign(topic, 1, kgo.NewOffset().AtStart())))
}

// ApiVersions: every connection of the pinned client opens with ApiVersions v; the client
// produces, consumes, and asks kadm for the broker's versions.
func sweepApiVersions(r *run) {
	topic := r.topic("av", 1, nil)
	r.produce(r.pinned(manual), "produced", rec(topic, 0, "k0", "v0", base))
	cl := r.pinned(assign(topic, 1, kgo.NewOffset().AtStart()))
	r.consume("consumed", 1, cl)
	vs, err := kadm.NewClient(cl).ApiVersions(r.ctx)
	r.must(err, "api versions")
	for _, b := range vs {
		r.must(b.Err, "api versions")
		has := []int16{}
		for _, k := range []int16{0, 1, 3, 18} {
			if _, _, ok := b.KeyVersions(k); ok {
				has = append(has, k)
			}
		}
		min, max, _ := b.KeyVersions(18)
		r.emit(obs{"step": "apiversions", "node": b.NodeID, "hasKeys": has, "pinnedAdvertised": min <= r.v && r.v <= max})
	}
}

// --------------------------------------------------------------------------------- list offsets

func (r *run) listed(step string, lo kadm.ListedOffsets, err error) {
	r.must(err, step)
	var rows []obs
	lo.Each(func(o kadm.ListedOffset) {
		rows = append(rows, obs{"step": step, "partition": o.Partition, "offset": o.Offset,
			"timestamp": o.Timestamp, "leaderEpoch": o.LeaderEpoch, "err": errName(o.Err)})
	})
	sort.Slice(rows, func(i, j int) bool { return rows[i]["partition"].(int32) < rows[j]["partition"].(int32) })
	for _, o := range rows {
		r.emit(o)
	}
}

// ListOffsets: kadm pinned to v lists the start, the end, offsets by time, and from the version
// that brought each: read_committed (v2), max timestamp (v7), local log start (v8), latest
// tiered (v9).
func sweepListOffsets(r *run) {
	topic := r.topic("lo", 2, nil)
	r.produce(r.plain(manual), "produced",
		rec(topic, 0, "", "a", base+1000), rec(topic, 0, "", "b", base+3000), rec(topic, 0, "", "c", base+2000),
		rec(topic, 1, "", "d", base+500))
	adm := kadm.NewClient(r.pinned())
	start, err := adm.ListStartOffsets(r.ctx, topic)
	r.listed("start", start, err)
	end, err := adm.ListEndOffsets(r.ctx, topic)
	r.listed("end", end, err)
	after, err := adm.ListOffsetsAfterMilli(r.ctx, base+1500, topic)
	r.listed("after-1500", after, err)
	future, err := adm.ListOffsetsAfterMilli(r.ctx, base+10_000_000, topic)
	r.listed("after-future", future, err)
	if r.v >= 2 {
		c, err := adm.ListCommittedOffsets(r.ctx, topic)
		r.listed("committed", c, err)
	}
	if r.v >= 7 {
		m, err := adm.ListMaxTimestampOffsets(r.ctx, topic)
		r.listed("max-timestamp", m, err)
	}
	if r.v >= 8 {
		l, err := adm.ListLocalLogStartOffsets(r.ctx, topic)
		r.listed("local-start", l, err)
	}
	if r.v >= 9 {
		l, err := adm.ListLatestRemoteOffsets(r.ctx, topic)
		r.listed("latest-tiered", l, err)
	}
}

// ------------------------------------------------------------------------------------- metadata

func aclOps(ops []kadm.ACLOperation) []string {
	out := []string{}
	for _, o := range ops {
		out = append(out, o.String())
	}
	sort.Strings(out)
	return out
}

func (r *run) topicDetail(step, name string, d kadm.TopicDetail, ok bool) {
	o := obs{"step": step, "topic": strings.TrimPrefix(name, r.prefix+"-"), "present": ok}
	if ok {
		o["err"] = errName(d.Err)
		o["internal"] = d.IsInternal
		o["authorizedOps"] = aclOps(d.AuthorizedOperations)
		o["hasId"] = d.ID != kadm.TopicID{}
		var parts []string
		for _, p := range d.Partitions.Sorted() {
			parts = append(parts, fmt.Sprintf("p%d leader=%d epoch=%d replicas=%v isr=%v offline=%v err=%s",
				p.Partition, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, p.OfflineReplicas, errName(p.Err)))
		}
		o["partitions"] = parts
	}
	r.emit(o)
}

func (r *run) ownTopics(m kadm.Metadata) []string {
	own := []string{}
	for name := range m.Topics {
		if strings.HasPrefix(name, r.prefix+"-") {
			own = append(own, strings.TrimPrefix(name, r.prefix+"-"))
		}
	}
	sort.Strings(own)
	return own
}

func (r *run) brokers(m kadm.Metadata) []string {
	var bs []string
	for _, b := range m.Brokers {
		rack := "<nil>"
		if b.Rack != nil {
			rack = *b.Rack
		}
		bs = append(bs, fmt.Sprintf("%d %s rack=%s", b.NodeID, b.Host, rack))
	}
	return bs
}

// Metadata: kadm pinned to v, asking for authorized operations (which makes kadm send every
// request rather than answer from the client's metadata cache), describes a topic and a missing
// one, all topics, and the cluster without topics (v0 has no "no topics" request: an empty list
// means all of them). v0-3 always allow auto-creation, so the missing topic is created (after
// which the run waits until it is visible); v4+ requests from kadm do not allow it.
func sweepMetadata(r *run) {
	topic := r.topic("m", 2, nil)
	missing := r.name("missing")
	adm := kadm.NewClient(r.pinned())
	ctx := kadm.WithAuthorizedOps(r.ctx)
	m, err := adm.Metadata(ctx, topic, missing)
	r.must(err, "metadata")
	for _, name := range []string{topic, missing} {
		d, ok := m.Topics[name]
		r.topicDetail("described", name, d, ok)
	}
	r.emit(obs{"step": "cluster", "controller": m.Controller, "hasCluster": m.Cluster != "", "brokers": r.brokers(m),
		"authorizedOps": aclOps(m.AuthorizedOperations)})
	if r.v < 4 {
		r.waitTopics(true, missing)
	}
	all, err := adm.Metadata(ctx)
	r.must(err, "metadata (all topics)")
	r.emit(obs{"step": "all-topics", "own": r.ownTopics(all)})
	bm, err := adm.BrokerMetadata(ctx)
	r.must(err, "metadata (no topics)")
	r.emit(obs{"step": "no-topics", "own": r.ownTopics(bm), "controller": bm.Controller, "brokers": r.brokers(bm)})
}

// -------------------------------------------------------------------------------------- groups

func (r *run) describeGroup(adm *kadm.Client, step string, groups ...string) {
	gs, err := adm.DescribeGroups(r.ctx, groups...)
	r.must(err, "describe groups")
	for _, group := range groups {
		g, ok := gs[group]
		if !ok {
			r.emit(obs{"step": step, "group": strings.TrimPrefix(group, r.prefix+"-"), "present": false})
			continue
		}
		assigned, members := []string{}, []string{}
		for _, m := range g.Members {
			if c, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range c.Topics {
					for _, p := range t.Partitions {
						assigned = append(assigned, fmt.Sprintf("%s/%d", strings.TrimPrefix(t.Topic, r.prefix+"-"), p))
					}
				}
			}
			inst := "<nil>"
			if m.InstanceID != nil {
				inst = *m.InstanceID
			}
			members = append(members, fmt.Sprintf("client=%s host=%s instance=%s member=%s", m.ClientID, m.ClientHost,
				inst, memberID.ReplaceAllString(m.MemberID, "<uuid>")))
		}
		sort.Strings(assigned)
		r.emit(obs{"step": step, "group": strings.TrimPrefix(group, r.prefix+"-"), "present": true,
			"err": errName(g.Err), "state": g.State, "protocolType": g.ProtocolType, "protocol": g.Protocol,
			"members": members, "assigned": assigned, "authorizedOps": aclOps(g.AuthorizedOperations)})
	}
}

func (r *run) committed(adm *kadm.Client, group, step string) {
	os, err := adm.FetchOffsets(r.ctx, group)
	r.must(err, "fetch offsets")
	var rows []obs
	os.Each(func(o kadm.OffsetResponse) {
		rows = append(rows, obs{"step": step, "partition": o.Partition, "offset": o.At, "leaderEpoch": o.LeaderEpoch,
			"metadata": memberID.ReplaceAllString(o.Metadata, "<member-id>"), "err": errName(o.Err)})
	})
	sort.Slice(rows, func(i, j int) bool { return rows[i]["partition"].(int32) < rows[j]["partition"].(int32) })
	if len(rows) == 0 {
		rows = append(rows, obs{"step": step, "none": true})
	}
	for _, o := range rows {
		r.emit(o)
	}
}

// member joins group with the run's key pinned, consumes n records, commits them, waits for a
// heartbeat when the key is Heartbeat, and returns (Close leaves the group).
func (r *run) member(group, topic string, n int, adm *kadm.Client, step string, describe bool) {
	var fetched []obs // what the member's own OffsetFetch returned when it joined
	var fetchedMu sync.Mutex
	cl := r.pinned(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.AutoCommitMarks(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.BlockRebalanceOnPoll(),
		kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.OnOffsetsFetched(func(_ context.Context, _ *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
			fetchedMu.Lock()
			defer fetchedMu.Unlock()
			fetched = fetched[:0]
			add := func(p int32, offset int64, epoch int32, meta *string, code int16) {
				m := "<nil>"
				if meta != nil {
					m = memberID.ReplaceAllString(*meta, "<member-id>")
				}
				fetched = append(fetched, obs{"step": step + "-fetched", "partition": p, "offset": offset,
					"leaderEpoch": epoch, "metadata": m, "err": errName(kerr.ErrorForCode(code))})
			}
			if resp.Version >= 8 { // batched by group (kgo also copies the answer to Topics)
				for _, g := range resp.Groups {
					for _, t := range g.Topics {
						for _, p := range t.Partitions {
							add(p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode)
						}
					}
				}
				return nil
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					add(p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode)
				}
			}
			return nil
		}))
	recs := r.consume(step, n, cl)
	fetchedMu.Lock()
	rows := slices.Clone(fetched)
	fetchedMu.Unlock()
	sort.Slice(rows, func(i, j int) bool { return rows[i]["partition"].(int32) < rows[j]["partition"].(int32) })
	for _, o := range rows {
		r.emit(o)
	}
	cl.MarkCommitRecords(recs...)
	r.must(cl.CommitUncommittedOffsets(r.ctx), "commit")
	cl.AllowRebalance()
	if r.key == 12 {
		for r.sent.Load() == 0 {
			if r.ctx.Err() != nil {
				r.fail("no heartbeat sent")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if describe {
		r.describeGroup(adm, "described-active", group)
	}
	r.emit(obs{"step": "left", "err": errName(cl.LeaveGroupContext(r.ctx))}) // LeaveGroup
}

// The group consumer with one of JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
// OffsetFetch, FindCoordinator pinned: a member consumes and commits, leaves; the commits are
// read back through kadm (also pinned, for OffsetFetch and FindCoordinator); a second member
// resumes from them.
func sweepGroup(r *run) {
	topic, group := r.topic("g", 2, nil), r.name("grp")
	prod := r.plain(manual)
	var first []*kgo.Record
	for i := 0; i < 4; i++ {
		first = append(first, rec(topic, int32(i%2), fmt.Sprintf("g%d", i), "first", base+int64(i)))
	}
	r.produce(prod, "produced", first...)
	plainAdm, pinnedAdm := r.admin(), kadm.NewClient(r.pinned())
	r.member(group, topic, 4, plainAdm, "consumed", true)
	r.describeGroup(plainAdm, "described-left", group)
	r.committed(pinnedAdm, group, "committed")
	r.produce(prod, "produced", rec(topic, 0, "g4", "second", base+4), rec(topic, 1, "g5", "second", base+5))
	r.member(group, topic, 2, plainAdm, "consumed-again", false)
	r.committed(pinnedAdm, group, "committed-again")
}

// DescribeGroups and ListGroups pinned to v: an active group (one member with an assignment),
// an empty group that only has commits, and a group that does not exist.
func sweepGroupAdmin(r *run) {
	topic := r.topic("ga", 1, nil)
	r.produce(r.plain(manual), "produced", rec(topic, 0, "k", "v", base))
	active, empty, missing := r.name("active"), r.name("empty"), r.name("missing")
	member := r.plain(kgo.ConsumerGroup(active), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	r.consume("consumed", 1, member)
	var os kadm.Offsets
	os.AddOffset(topic, 0, 1, -1)
	_, err := r.admin().CommitOffsets(r.ctx, empty, os)
	r.must(err, "commit offsets")
	adm := kadm.NewClient(r.pinned())
	if r.key == 15 {
		r.describeGroup(adm, "described", active, empty, missing)
	} else {
		r.listGroups(adm, "listed")
		if r.v >= 4 { // the states filter (KIP-518)
			r.listGroups(adm, "listed-stable", "Stable")
		}
	}
	member.Close()
}

func (r *run) listGroups(adm *kadm.Client, step string, states ...string) {
	ls, err := adm.ListGroups(r.ctx, states...)
	r.must(err, "list groups")
	var rows []string
	for _, g := range ls.Sorted() {
		if strings.HasPrefix(g.Group, r.prefix+"-") {
			rows = append(rows, fmt.Sprintf("%s type=%q state=%q", strings.TrimPrefix(g.Group, r.prefix+"-"), g.ProtocolType, g.State))
		}
	}
	r.emit(obs{"step": step, "groups": rows})
}

// DeleteGroups pinned to v: an empty group with commits, an active group (NON_EMPTY_GROUP) and
// a missing one; the deleted group's commits and listing are gone.
func sweepDeleteGroups(r *run) {
	topic := r.topic("dg", 1, nil)
	r.produce(r.plain(manual), "produced", rec(topic, 0, "k", "v", base))
	doomed, active, missing := r.name("doomed"), r.name("active"), r.name("missing")
	member := r.plain(kgo.ConsumerGroup(active), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	r.consume("consumed", 1, member)
	plain := r.admin()
	var os kadm.Offsets
	os.AddOffset(topic, 0, 1, -1)
	_, err := plain.CommitOffsets(r.ctx, doomed, os)
	r.must(err, "commit offsets")
	resp, err := kadm.NewClient(r.pinned()).DeleteGroups(r.ctx, doomed, active, missing)
	r.must(err, "delete groups")
	for _, g := range []string{doomed, active, missing} {
		r.emit(obs{"step": "deleted", "group": strings.TrimPrefix(g, r.prefix+"-"), "err": errName(resp[g].Err)})
	}
	r.committed(plain, doomed, "committed-after")
	r.listGroups(plain, "listed-after")
	member.Close()
}

// OffsetDelete: commits on two partitions of an empty group, one deleted through kadm.
func sweepOffsetDelete(r *run) {
	topic, group := r.topic("od", 2, nil), r.name("grp")
	plain := r.admin()
	var os kadm.Offsets
	os.AddOffset(topic, 0, 1, -1)
	os.AddOffset(topic, 1, 2, -1)
	_, err := plain.CommitOffsets(r.ctx, group, os)
	r.must(err, "commit offsets")
	var s kadm.TopicsSet
	s.Add(topic, 0)
	resp, err := kadm.NewClient(r.pinned()).DeleteOffsets(r.ctx, group, s)
	r.must(err, "delete offsets")
	perr, ok := resp.Lookup(topic, 0)
	r.emit(obs{"step": "deleted", "present": ok, "err": errName(perr)})
	r.committed(plain, group, "committed-after")
}

// -------------------------------------------------------------------------------- topic admin

// CreateTopics pinned to v: with a config, again (TOPIC_ALREADY_EXISTS), zero partitions, a bad
// name, validate-only, and broker defaults for partitions and replication factor (v4+).
func sweepCreateTopics(r *run) {
	adm := kadm.NewClient(r.pinned())
	step := func(name string, resp kadm.CreateTopicResponses, err error, t string) {
		r.must(err, name)
		c := resp[t]
		o := obs{"step": name, "topic": strings.TrimPrefix(t, r.prefix+"-"), "err": errName(c.Err),
			"partitions": c.NumPartitions, "replicationFactor": c.ReplicationFactor, "hasId": c.ID != kadm.TopicID{}}
		if rc, ok := c.Configs["retention.ms"]; ok {
			o["retention.ms"] = fmt.Sprintf("%s %s", rc.MaybeValue(), rc.Source)
		}
		r.emit(o)
	}
	t := r.name("ct")
	cfg := map[string]*string{"retention.ms": kadm.StringPtr("3600000")}
	resp, err := adm.CreateTopics(r.ctx, 2, 1, cfg, t)
	step("create", resp, err, t)
	resp, err = adm.CreateTopics(r.ctx, 2, 1, nil, t)
	step("create-again", resp, err, t)
	zero := r.name("zero")
	resp, err = adm.CreateTopics(r.ctx, 0, 1, nil, zero)
	step("create-zero", resp, err, zero)
	bad := r.name("bad name!")
	resp, err = adm.CreateTopics(r.ctx, 1, 1, nil, bad)
	step("create-bad-name", resp, err, bad)
	dry := r.name("dry")
	resp, err = adm.ValidateCreateTopics(r.ctx, 3, 1, nil, dry)
	step("validate-only", resp, err, dry)
	names, created := []string{t, dry}, []string{t}
	if r.v >= 4 { // KIP-464: -1 takes the broker's num.partitions and default.replication.factor
		def := r.name("defaults")
		resp, err = adm.CreateTopics(r.ctx, -1, -1, nil, def)
		step("create-defaults", resp, err, def)
		names, created = append(names, def), append(created, def)
	}
	r.waitTopics(true, created...) // the validate-only topic must not appear meanwhile
	m, err := r.admin().Metadata(r.ctx, names...)
	r.must(err, "metadata")
	for _, name := range names {
		d, ok := m.Topics[name]
		r.emit(obs{"step": "listed", "topic": strings.TrimPrefix(name, r.prefix+"-"),
			"exists": ok && d.Err == nil, "partitions": len(d.Partitions)})
	}
}

// DeleteTopics pinned to v: two topics and a missing one; the two are gone afterwards.
func sweepDeleteTopics(r *run) {
	a, b, missing := r.topic("dt-a", 1, nil), r.topic("dt-b", 2, nil), r.name("missing")
	resp, err := kadm.NewClient(r.pinned()).DeleteTopics(r.ctx, a, b, missing)
	r.must(err, "delete topics")
	for _, t := range []string{a, b, missing} {
		r.emit(obs{"step": "deleted", "topic": strings.TrimPrefix(t, r.prefix+"-"), "err": errName(resp[t].Err)})
	}
	r.waitTopics(false, a, b)
	all, err := r.admin().Metadata(r.ctx)
	r.must(err, "metadata")
	r.emit(obs{"step": "remaining", "own": r.ownTopics(all)})
}

// CreatePartitions pinned to v: add two, validate-only, shrink (INVALID_PARTITIONS), a missing
// topic; the new partitions take records.
func sweepCreatePartitions(r *run) {
	topic, missing := r.topic("cp", 1, nil), r.name("missing")
	adm := kadm.NewClient(r.pinned())
	step := func(name string, resp kadm.CreatePartitionsResponses, err error, t string) {
		r.must(err, name)
		r.emit(obs{"step": name, "topic": strings.TrimPrefix(t, r.prefix+"-"), "err": errName(resp[t].Err)})
	}
	resp, err := adm.CreatePartitions(r.ctx, 2, topic)
	step("add-2", resp, err, topic)
	// absolute counts from here: kadm adds to the count in its cached metadata, which may not
	// have seen the new partitions yet
	resp, err = adm.ValidateUpdatePartitions(r.ctx, 4, topic)
	step("validate-set-4", resp, err, topic)
	resp, err = adm.UpdatePartitions(r.ctx, 2, topic)
	step("set-2", resp, err, topic)
	resp, err = adm.UpdatePartitions(r.ctx, 2, missing)
	step("set-missing", resp, err, missing)
	r.waitTopics(true, topic)
	deadline := time.Now().Add(15 * time.Second)
	for {
		m, err := kadm.NewClient(r.plain()).Metadata(r.ctx, topic)
		r.must(err, "metadata")
		if n := len(m.Topics[topic].Partitions); n == 3 || time.Now().After(deadline) {
			r.emit(obs{"step": "partitions", "count": n})
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.produce(r.plain(manual), "produced", rec(topic, 2, "k", "v", base))
}

// DeleteRecords pinned to v: up to offset 2 of a partition, beyond the end of another
// (OFFSET_OUT_OF_RANGE); the log start offset moves and a consumer starts there.
func sweepDeleteRecords(r *run) {
	topic := r.topic("dr", 2, nil)
	r.produce(r.plain(manual), "produced",
		rec(topic, 0, "", "a", base), rec(topic, 0, "", "b", base+1), rec(topic, 0, "", "c", base+2),
		rec(topic, 1, "", "d", base))
	var os kadm.Offsets
	os.AddOffset(topic, 0, 2, -1)
	os.AddOffset(topic, 1, 5, -1)
	resp, err := kadm.NewClient(r.pinned()).DeleteRecords(r.ctx, os)
	r.must(err, "delete records")
	for _, d := range resp.Sorted() {
		r.emit(obs{"step": "deleted", "partition": d.Partition, "lowWatermark": d.LowWatermark, "err": errName(d.Err)})
	}
	start, err := r.admin().ListStartOffsets(r.ctx, topic)
	r.listed("start", start, err)
	r.consume("consumed", 2, r.plain(assign(topic, 2, kgo.NewOffset().AtStart())))
}

// OffsetForLeaderEpoch pinned to v: the end offset of epoch 0 on a written and on an empty
// partition.
func sweepOffsetForLeaderEpoch(r *run) {
	topic := r.topic("ofle", 2, nil)
	r.produce(r.plain(manual), "produced", rec(topic, 0, "", "a", base), rec(topic, 0, "", "b", base+1),
		rec(topic, 0, "", "c", base+2))
	resp, err := kadm.NewClient(r.pinned()).OffsetForLeaderEpoch(r.ctx,
		kadm.OffsetForLeaderEpochRequest{topic: {0: 0, 1: 0}})
	r.must(err, "offset for leader epoch")
	for p := int32(0); p < 2; p++ {
		e := resp[topic][p]
		r.emit(obs{"step": "epoch-end", "partition": p, "leaderEpoch": e.LeaderEpoch, "endOffset": e.EndOffset,
			"err": errName(e.Err)})
	}
}

// ---------------------------------------------------------------------------------------- configs

func (r *run) describedConfigs(adm *kadm.Client, step string, keys ...string) {
	rcs, err := adm.DescribeTopicConfigs(r.ctx, r.name("cfg"), r.name("missing"))
	r.must(err, "describe configs")
	for _, rc := range rcs {
		byKey := map[string]kadm.Config{}
		for _, c := range rc.Configs {
			byKey[c.Key] = c
		}
		var entries []string
		for _, k := range keys {
			c, ok := byKey[k]
			if !ok {
				entries = append(entries, k+" absent")
				continue
			}
			var syn []string
			for _, s := range c.Synonyms {
				v := "<nil>"
				if s.Value != nil {
					v = *s.Value
				}
				syn = append(syn, fmt.Sprintf("%s=%s %s", s.Key, v, s.Source))
			}
			entries = append(entries, fmt.Sprintf("%s=%s %s sensitive=%v synonyms=%v", k, c.MaybeValue(), c.Source,
				c.Sensitive, syn))
		}
		r.emit(obs{"step": step, "resource": strings.TrimPrefix(rc.Name, r.prefix+"-"), "err": errName(rc.Err),
			"entries": entries})
	}
}

var configKeys = []string{"retention.ms", "cleanup.policy", "segment.ms", "max.message.bytes"}

// DescribeConfigs pinned to v: a topic's configs set at creation and defaults (with synonyms),
// a missing topic, the broker's.
func sweepDescribeConfigs(r *run) {
	r.topic("cfg", 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000"), "cleanup.policy": kadm.StringPtr("compact")})
	adm := kadm.NewClient(r.pinned())
	r.describedConfigs(adm, "described", configKeys...)
	rcs, err := adm.DescribeBrokerConfigs(r.ctx, 1)
	r.must(err, "describe broker configs")
	for _, rc := range rcs {
		var entries []string
		for _, c := range rc.Configs {
			if c.Key == "num.partitions" || c.Key == "log.retention.hours" || c.Key == "auto.create.topics.enable" {
				entries = append(entries, fmt.Sprintf("%s=%s %s", c.Key, c.MaybeValue(), c.Source))
			}
		}
		sort.Strings(entries)
		r.emit(obs{"step": "broker", "resource": rc.Name, "err": errName(rc.Err), "entries": entries})
	}
}

func (r *run) altered(step string, resp kadm.AlterConfigsResponses, err error) {
	r.must(err, step)
	var rows []string
	for _, a := range resp {
		rows = append(rows, fmt.Sprintf("%s %s", strings.TrimPrefix(a.Name, r.prefix+"-"), errName(a.Err)))
	}
	sort.Strings(rows)
	r.emit(obs{"step": step, "results": rows})
}

// AlterConfigs (the whole set replaced) pinned to v: altered, validate-only, an invalid value,
// a missing topic; read back with default versions.
func sweepAlterConfigs(r *run) {
	topic := r.topic("cfg", 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000"), "segment.ms": kadm.StringPtr("600000")})
	adm := kadm.NewClient(r.pinned())
	set := func(k, v string) kadm.AlterConfig { return kadm.AlterConfig{Name: k, Value: kadm.StringPtr(v)} }
	resp, err := adm.AlterTopicConfigsState(r.ctx, []kadm.AlterConfig{set("retention.ms", "7200000"), set("cleanup.policy", "compact")}, topic)
	r.altered("altered", resp, err)
	resp, err = adm.ValidateAlterTopicConfigsState(r.ctx, []kadm.AlterConfig{set("retention.ms", "1")}, topic)
	r.altered("validate-only", resp, err)
	resp, err = adm.AlterTopicConfigsState(r.ctx, []kadm.AlterConfig{set("retention.ms", "abc")}, topic)
	r.altered("invalid-value", resp, err)
	resp, err = adm.AlterTopicConfigsState(r.ctx, []kadm.AlterConfig{set("retention.ms", "1000")}, r.name("missing"))
	r.altered("missing-topic", resp, err)
	r.describedConfigs(r.admin(), "read-back", configKeys...)
}

// IncrementalAlterConfigs pinned to v: set, delete and append in one request, validate-only, an
// invalid value; read back with default versions.
func sweepIncrementalAlterConfigs(r *run) {
	topic := r.topic("cfg", 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000"), "cleanup.policy": kadm.StringPtr("delete")})
	adm := kadm.NewClient(r.pinned())
	resp, err := adm.AlterTopicConfigs(r.ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("600000")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
	}, topic)
	r.altered("altered", resp, err)
	resp, err = adm.ValidateAlterTopicConfigs(r.ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("1000")}}, topic)
	r.altered("validate-only", resp, err)
	resp, err = adm.AlterTopicConfigs(r.ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("abc")}}, topic)
	r.altered("invalid-value", resp, err)
	r.describedConfigs(r.admin(), "read-back", configKeys...)
}

// ------------------------------------------------------------------------- cluster, partitions

// DescribeCluster pinned to v (kadm has no helper: the kmsg request through the client), with
// the broker endpoint type (v1) and fenced brokers (v2).
func sweepDescribeCluster(r *run) {
	cl := r.pinned()
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeClusterAuthorizedOperations = true
	req.EndpointType = 1
	req.IncludeFencedBrokers = true
	resp, err := req.RequestWith(r.ctx, cl)
	r.must(err, "describe cluster")
	var brokers []string
	for _, b := range resp.Brokers {
		rack := "<nil>"
		if b.Rack != nil {
			rack = *b.Rack
		}
		brokers = append(brokers, fmt.Sprintf("%d %s rack=%s fenced=%v", b.NodeID, b.Host, rack, b.IsFenced))
	}
	r.emit(obs{"step": "cluster", "err": errName(kerr.ErrorForCode(resp.ErrorCode)), "endpointType": resp.EndpointType,
		"hasCluster": resp.ClusterID != "", "controller": resp.ControllerID, "brokers": brokers,
		"authorizedOps": aclOps(kadm.DecodeACLOperations(resp.ClusterAuthorizedOperations))})
}

// ListConfigResources pinned to v (the kmsg request through the client): a topic of the run's
// own and a group given a config override, listed by type (topics and groups; only the run's own
// names are kept, the broker holds others) and with no type (every type), where this broker is
// one of the BROKER resources.
func sweepListConfigResources(r *run) {
	topic, group := r.topic("lcr", 1, nil), r.name("lcr-group")
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "consumer.heartbeat.interval.ms", kadm.StringPtr("6000")
	res.Configs = append(res.Configs, cfg)
	alter.Resources = append(alter.Resources, res)
	altered, err := alter.RequestWith(r.ctx, r.plain())
	r.must(err, "alter group config")
	r.emit(obs{"step": "group-config", "err": errName(kerr.ErrorForCode(altered.Resources[0].ErrorCode))})
	for _, types := range [][]int8{{2, 32}, {}} {
		// Kafka's broker learns the group's config from the controller a moment after the alter is
		// answered: list again until both resources are there (or 10 s have passed)
		deadline := time.Now().Add(10 * time.Second)
		for {
			req := kmsg.NewPtrListConfigResourcesRequest()
			req.ResourceTypes = types
			resp, err := req.RequestWith(r.ctx, r.pinned())
			r.must(err, "list config resources")
			var own []string
			brokers := 0
			for _, c := range resp.ConfigResources {
				if c.Name == topic || c.Name == group {
					own = append(own, fmt.Sprintf("%d %s", c.Type, strings.TrimPrefix(c.Name, r.prefix+"-")))
				} else if c.Type == 4 {
					brokers++
				}
			}
			if len(own) < 2 && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			sort.Strings(own)
			r.emit(obs{"step": "listed", "types": fmt.Sprint(types), "err": errName(kerr.ErrorForCode(resp.ErrorCode)),
				"own": own, "brokers": brokers})
			break
		}
	}
}

// DescribeTopicPartitions pinned to v (the kmsg request through the client): a topic and a
// missing one.
func sweepDescribeTopicPartitions(r *run) {
	topic, missing := r.topic("dtp", 2, nil), r.name("missing")
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	for _, t := range []string{topic, missing} {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = t
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(r.ctx, r.pinned())
	r.must(err, "describe topic partitions")
	for _, t := range resp.Topics {
		name := "<nil>"
		if t.Topic != nil {
			name = strings.TrimPrefix(*t.Topic, r.prefix+"-")
		}
		var parts []string
		for _, p := range t.Partitions {
			parts = append(parts, fmt.Sprintf("p%d leader=%d epoch=%d replicas=%v isr=%v elr=%v lastKnownElr=%v offline=%v err=%d",
				p.Partition, p.LeaderID, p.LeaderEpoch, p.Replicas, p.ISR, p.EligibleLeaderReplicas, p.LastKnownELR,
				p.OfflineReplicas, p.ErrorCode))
		}
		sort.Strings(parts)
		r.emit(obs{"step": "described", "topic": name, "err": errName(kerr.ErrorForCode(t.ErrorCode)),
			"internal": t.IsInternal, "hasId": t.TopicID != [16]byte{}, "partitions": parts})
	}
}

// ElectLeaders pinned to v, on one node: the only replica leads already (ELECTION_NOT_NEEDED,
// preferred and unclean; v0 has no election type and is always preferred), a missing partition
// and a missing topic (UNKNOWN_TOPIC_OR_PARTITION with the controller's messages), and every
// partition (a nil set: the answer leaves out partitions that need no election).
func sweepElectLeaders(r *run) {
	topic, missing := r.topic("el", 2, nil), r.name("missing")
	adm := kadm.NewClient(r.pinned())
	elect := func(step string, how kadm.ElectLeadersHow, s kadm.TopicsSet) {
		rs, err := adm.ElectLeaders(r.ctx, how, s)
		r.must(err, step)
		results := []string{}
		for t, ps := range rs {
			if !strings.HasPrefix(t, r.prefix+"-") {
				continue // every partition: other runs' topics and the internal ones
			}
			name := strings.TrimPrefix(t, r.prefix+"-")
			if len(ps) == 0 {
				results = append(results, name+" none")
			}
			for p, res := range ps {
				results = append(results, fmt.Sprintf("%s-%d how=%d err=%s msg=%q", name, p, res.How, errName(res.Err),
					strings.ReplaceAll(res.ErrMessage, r.prefix+"-", "")))
			}
		}
		sort.Strings(results)
		r.emit(obs{"step": step, "results": results})
	}
	var named kadm.TopicsSet
	named.Add(topic, 0, 1, 5)
	named.Add(missing, 0)
	elect("preferred", kadm.ElectPreferredReplica, named)
	elect("unclean", kadm.ElectLiveReplica, named)
	elect("all", kadm.ElectPreferredReplica, nil)
}

// Client quotas with DescribeClientQuotas (48) or AlterClientQuotas (49) pinned to v: set quotas
// on a client id and a user with that client id, a validate-only and a fractional whole-number
// value (refused), describe them (exact client id, any user), remove them.
func sweepClientQuotas(r *run) {
	alterer, describer := kadm.NewClient(r.plain()), kadm.NewClient(r.plain())
	if r.key == 49 {
		alterer = kadm.NewClient(r.pinned())
	} else {
		describer = kadm.NewClient(r.pinned())
	}
	client, user := r.name("c"), r.name("u")
	str := func(s string) *string { return &s }
	strip := func(s string) string { return strings.ReplaceAll(s, r.prefix+"-", "") }
	entries := []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: str(client)}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: str(user)}, {Type: "client-id", Name: str(client)}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 2048}, {Key: "request_percentage", Value: 12.5}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: str(r.name("bad"))}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1.5}}},
	}
	alter := func(step string, validate bool, entries []kadm.AlterClientQuotaEntry) {
		var resp kadm.AlteredClientQuotas
		var err error
		if validate {
			resp, err = alterer.ValidateAlterClientQuotas(r.ctx, entries)
		} else {
			resp, err = alterer.AlterClientQuotas(r.ctx, entries)
		}
		r.must(err, step)
		results := []string{}
		for _, a := range resp {
			results = append(results, fmt.Sprintf("%s err=%s msg=%q", strip(a.Entity.String()), errName(a.Err), a.ErrMessage))
		}
		sort.Strings(results)
		r.emit(obs{"step": step, "results": results})
	}
	describe := func(want int) []string {
		deadline := time.Now().Add(10 * time.Second) // Kafka's brokers learn of a change a moment later
		for {
			qs, err := describer.DescribeClientQuotas(r.ctx, false, []kadm.DescribeClientQuotaComponent{
				{Type: "client-id", MatchName: str(client), MatchType: 0}})
			r.must(err, "describe")
			got := []string{}
			for _, q := range qs {
				var vs []string
				for _, v := range q.Values {
					vs = append(vs, fmt.Sprintf("%s=%v", v.Key, v.Value))
				}
				sort.Strings(vs)
				got = append(got, fmt.Sprintf("%s %v", strip(q.Entity.String()), vs))
			}
			sort.Strings(got)
			if len(got) == want || time.Now().After(deadline) {
				return got
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	alter("validate-only", true, entries[:1])
	alter("altered", false, entries)
	r.emit(obs{"step": "described", "quotas": describe(2)})
	alter("removed", false, []kadm.AlterClientQuotaEntry{
		{Entity: entries[0].Entity, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}},
		{Entity: entries[1].Entity, Ops: []kadm.AlterClientQuotaOp{
			{Key: "consumer_byte_rate", Remove: true}, {Key: "request_percentage", Remove: true}}},
	})
	r.emit(obs{"step": "described-after", "quotas": describe(0)})
}

// AlterReplicaLogDirs pinned to v: a topic's one partition "moved" to the dir that holds it
// (DescribeLogDirs at default versions finds it: paths differ between brokers), to a path that
// is no log dir, and a topic that does not exist to the real dir; the errors per partition.
func sweepAlterReplicaLogDirs(r *run) {
	topic := r.topic("ard", 1, nil)
	r.produce(r.plain(manual), "produced", rec(topic, 0, "k", "v", base))
	var named kadm.TopicsSet
	named.Add(topic, 0)
	described, err := r.admin().DescribeAllLogDirs(r.ctx, named)
	r.must(err, "describe log dirs")
	dir := ""
	described.Each(func(d kadm.DescribedLogDir) {
		if _, ok := d.Topics[topic][0]; ok {
			dir = d.Dir
		}
	})
	adm := kadm.NewClient(r.pinned())
	alter := func(step, d, t string) {
		var s kadm.TopicsSet
		s.Add(t, 0)
		var req kadm.AlterReplicaLogDirsReq
		req.Add(d, s)
		resp, err := adm.AlterAllReplicaLogDirs(r.ctx, req)
		var got []string
		if err != nil { // an error of the whole request (kadm's shard error): its Kafka name
			got = append(got, "request err="+errName(err))
		}
		resp.Each(func(a kadm.AlterReplicaLogDirsResponse) {
			got = append(got, fmt.Sprintf("%s-%d err=%s", strings.TrimPrefix(a.Topic, r.prefix+"-"), a.Partition, errName(a.Err)))
		})
		sort.Strings(got)
		r.emit(obs{"step": step, "found": d != "", "results": got})
	}
	alter("current-dir", dir, topic)
	alter("unknown-dir", "/no/such/log/dir", topic)
	alter("unknown-topic", dir, r.prefix+"-missing")
}

// DescribeLogDirs pinned to v: a topic with one record in partition 0 and none in 1; its
// partitions, then every partition (nil set, the run's topic kept; kadm itself refuses a topic
// that Metadata does not list before sending anything). The
// dir's path and the volume's sizes differ between brokers: observed as present or not.
func sweepDescribeLogDirs(r *run) {
	topic := r.topic("ld", 2, nil)
	r.produce(r.plain(manual), "produced", rec(topic, 0, "k", "v", base))
	adm := kadm.NewClient(r.pinned())
	describe := func(step string, s kadm.TopicsSet) {
		all, err := adm.DescribeAllLogDirs(r.ctx, s)
		r.must(err, step)
		for _, d := range all.Sorted() {
			var parts []string
			for t, ps := range d.Topics {
				if !strings.HasPrefix(t, r.prefix+"-") {
					continue // every partition: other runs' topics and the internal ones
				}
				for p, dp := range ps {
					parts = append(parts, fmt.Sprintf("%s-%d size=%d lag=%d future=%v",
						strings.TrimPrefix(t, r.prefix+"-"), p, dp.Size, dp.OffsetLag, dp.IsFuture))
				}
			}
			sort.Strings(parts)
			r.emit(obs{"step": step, "broker": d.Broker, "hasDir": strings.HasPrefix(d.Dir, "/"), "err": errName(d.Err),
				"volume":   d.TotalBytes > 0 && d.UsableBytes > 0 && d.UsableBytes <= d.TotalBytes,
				"cordoned": d.IsCordoned, "partitions": parts})
		}
	}
	var named kadm.TopicsSet
	named.Add(topic, 0, 1)
	describe("named", named)
	describe("all", nil)
}

// AlterPartitionReassignments (45) or ListPartitionReassignments (46) pinned to v, on a one-broker
// cluster: a reassignment to the partition's own replica (done at once), the refused ones (a
// broker that does not exist, a replica twice, no replicas, an unknown topic and partition), a
// cancel with nothing in progress; then the list for the topic's partition and an unknown topic
// (nothing in progress: an empty answer).
func sweepReassignments(r *run) {
	topic := r.topic("ra", 1, nil)
	alterer, lister := kadm.NewClient(r.plain()), kadm.NewClient(r.plain())
	if r.key == 45 {
		alterer = kadm.NewClient(r.pinned())
	} else {
		lister = kadm.NewClient(r.pinned())
	}
	bm, err := lister.BrokerMetadata(r.ctx)
	r.must(err, "metadata")
	id := bm.Brokers[0].NodeID
	strip := func(s string) string { return strings.ReplaceAll(s, r.prefix+"-", "") }
	alter := func(step string, ctx context.Context, assign func(q *kadm.AlterPartitionAssignmentsReq)) {
		var req kadm.AlterPartitionAssignmentsReq
		assign(&req)
		rs, err := alterer.AlterPartitionAssignments(ctx, req)
		r.must(err, step)
		results := []string{}
		for _, a := range rs.Sorted() {
			results = append(results, fmt.Sprintf("%s-%d err=%s", strip(a.Topic), a.Partition, errName(a.Err)))
		}
		r.emit(obs{"step": step, "results": results})
	}
	alter("same", r.ctx, func(q *kadm.AlterPartitionAssignmentsReq) { q.Assign(topic, 0, []int32{id}) })
	alter("unknown-broker", r.ctx, func(q *kadm.AlterPartitionAssignmentsReq) { q.Assign(topic, 0, []int32{id, id + 100}) })
	alter("duplicate", r.ctx, func(q *kadm.AlterPartitionAssignmentsReq) { q.Assign(topic, 0, []int32{id, id}) })
	alter("empty", r.ctx, func(q *kadm.AlterPartitionAssignmentsReq) { q.Assign(topic, 0, []int32{}) })
	alter("unknown", r.ctx, func(q *kadm.AlterPartitionAssignmentsReq) {
		q.Assign(r.name("missing"), 0, []int32{id})
		q.Assign(topic, 7, []int32{id})
	})
	alter("cancel", r.ctx, func(q *kadm.AlterPartitionAssignmentsReq) { q.CancelAssign(topic, 0) })
	var set kadm.TopicsSet
	set.Add(topic, 0)
	set.Add(r.name("missing"), 0)
	listed, err := lister.ListPartitionReassignments(r.ctx, set)
	r.must(err, "list")
	ongoing := []string{}
	for _, l := range listed.Sorted() {
		ongoing = append(ongoing, fmt.Sprintf("%s-%d replicas=%v adding=%v removing=%v",
			strip(l.Topic), l.Partition, l.Replicas, l.AddingReplicas, l.RemovingReplicas))
	}
	r.emit(obs{"step": "listed", "ongoing": ongoing})
}

// ConsumerGroupHeartbeat (68; franz-go runs KIP-848 at v1 only) or ConsumerGroupDescribe (69)
// pinned: a KIP-848 member (kgo.ServerSideBalancer, the server-side range assignor) consumes a
// two-partition topic and commits; the group is described while it is a member, beside a classic
// group (commits only) and a missing one; it leaves, and a second member resumes from the commits.
func sweepConsumerProtocol(r *run) {
	topic, group, classic, missing := r.topic("cp", 2, nil), r.name("grp"), r.name("classic"), r.name("missing")
	prod := r.plain(manual)
	var first []*kgo.Record
	for i := 0; i < 4; i++ {
		first = append(first, rec(topic, int32(i%2), fmt.Sprintf("c%d", i), "first", base+int64(i)))
	}
	r.produce(prod, "produced", first...)
	var offsets kadm.Offsets
	offsets.AddOffset(topic, 0, 1, -1)
	_, err := r.admin().CommitOffsets(r.ctx, classic, offsets)
	r.must(err, "commit offsets (classic group)")
	member, describer := r.plain, kadm.NewClient(r.plain())
	if r.key == 68 {
		member = r.pinned
	} else {
		describer = kadm.NewClient(r.pinned())
	}
	join := func(step string, n int) {
		cl := member(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ServerSideBalancer(),
			kgo.Balancers(kgo.RangeBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitMarks())
		recs := r.consume(step, n, cl)
		cl.MarkCommitRecords(recs...)
		r.must(cl.CommitUncommittedOffsets(r.ctx), "commit")
		if step == "consumed" {
			r.describeConsumerGroups(describer, "described", group, classic, missing)
		}
		r.emit(obs{"step": step + "-left", "err": errName(cl.LeaveGroupContext(r.ctx))})
		cl.Close() // no heartbeat after the leave: a member that joined again would keep a partition
		r.committed(r.admin(), group, step+"-committed")
	}
	join("consumed", 4)
	r.produce(prod, "produced", rec(topic, 0, "c4", "second", base+4), rec(topic, 1, "c5", "second", base+5))
	join("consumed-again", 2)
}

func (r *run) describeConsumerGroups(adm *kadm.Client, step string, groups ...string) {
	gs, err := adm.DescribeConsumerGroups(r.ctx, groups...)
	if _, shard := err.(*kadm.ShardErrors); err != nil && !shard {
		r.must(err, "describe consumer groups")
	}
	strip := func(s string) string { return strings.TrimPrefix(s, r.prefix+"-") }
	parts := func(s kadm.TopicsSet) []string {
		out := []string{}
		for t, ps := range s {
			for p := range ps {
				out = append(out, fmt.Sprintf("%s/%d", strip(t), p))
			}
		}
		sort.Strings(out)
		return out
	}
	for _, group := range groups {
		g, ok := gs[group]
		if !ok {
			r.emit(obs{"step": step, "group": strip(group), "present": false})
			continue
		}
		members := []string{}
		for _, m := range g.Members {
			topics := []string{}
			for _, t := range m.SubscribedTopics {
				topics = append(topics, strip(t))
			}
			members = append(members, fmt.Sprintf("epoch=%d client=%s type=%d topics=%v assigned=%v target=%v",
				m.MemberEpoch, m.ClientID, m.MemberType, topics, parts(m.Assignment), parts(m.TargetAssignment)))
		}
		r.emit(obs{"step": step, "group": strip(group), "present": true, "err": errName(g.Err), "state": g.State,
			"epoch": g.Epoch, "assignmentEpoch": g.AssignmentEpoch, "assignor": g.AssignorName, "members": members,
			"authorizedOps": aclOps(g.AuthorizedOperations)})
	}
}

// ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78) or ShareAcknowledge (79)
// pinned: a share group starting at the earliest offset (share.auto.offset.reset set with
// IncrementalAlterConfigs on the GROUP resource) consumes four records with franz-go's share
// consumer, accepts them (FlushAcks), and is described while its member is in it.
// awaitGroupConfig: DescribeConfigs on the group until `name` reads `value` (up to 10 s). Kafka's
// broker learns a group's config from its controller a moment after the alter is answered; a
// share consumer joining before that would start at the latest offset.
func (r *run) awaitGroupConfig(group, name, value string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, group, []string{name}
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(r.ctx, r.plain())
		if err == nil && len(resp.Resources) == 1 {
			for _, c := range resp.Resources[0].Configs {
				if c.Name == name && c.Value != nil && *c.Value == value {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.fail("group %s: %s never read %s", group, name, value)
}

// shareFromEarliest sets the share group's share.auto.offset.reset to earliest (as the share
// consumer tools do) and waits until the broker reads it back.
func (r *run) shareFromEarliest(group string) {
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceType(32) // GROUP
	res.ResourceName = group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	earliest := "earliest"
	cfg.Name, cfg.Value = "share.auto.offset.reset", &earliest
	res.Configs = append(res.Configs, cfg)
	alter.Resources = append(alter.Resources, res)
	altered, err := alter.RequestWith(r.ctx, r.plain())
	r.must(err, "alter group config")
	for _, a := range altered.Resources {
		r.emit(obs{"step": "group-config", "err": errName(kerr.ErrorForCode(a.ErrorCode))})
	}
	r.awaitGroupConfig(group, "share.auto.offset.reset", earliest)
}

// produceShareRecords writes four records (keys <prefix>0..3, value "share") to partition 0 and
// returns the producer.
func (r *run) produceShareRecords(topic, prefix string) *kgo.Client {
	prod := r.plain(manual)
	var recs []*kgo.Record
	for i := 0; i < 4; i++ {
		recs = append(recs, rec(topic, 0, fmt.Sprintf("%s%d", prefix, i), "share", base+int64(i)))
	}
	r.produce(prod, "produced", recs...)
	return prod
}

func sweepShare(r *run) {
	topic, group := r.topic("sh", 1, nil), r.name("grp")
	r.shareFromEarliest(group)
	r.produceShareRecords(topic, "s")
	member, describer := r.pinned, r.admin()
	if r.key == 77 {
		member, describer = r.plain, kadm.NewClient(r.pinned())
	}
	cl := member(kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	got := r.consume("consumed", 4, cl)
	cl.MarkAcks(kgo.AckAccept, got...)
	r.must(cl.FlushAcks(r.ctx), "flush acks")
	described, err := describer.DescribeShareGroups(r.ctx, group)
	if _, shard := err.(*kadm.ShardErrors); err != nil && !shard {
		r.must(err, "describe share groups")
	}
	for _, g := range described {
		var members []string
		for _, m := range g.Members {
			var assigned []string
			for t, ps := range m.Assignment {
				for p := range ps {
					assigned = append(assigned, fmt.Sprintf("%s/%d", strings.TrimPrefix(t, r.prefix+"-"), p))
				}
			}
			sort.Strings(assigned)
			members = append(members, fmt.Sprintf("assigned=%v", assigned))
		}
		r.emit(obs{"step": "described", "err": errName(g.Err), "state": g.GroupState, "assignor": g.Assignor,
			"members": members})
	}
	cl.Close()
}

// DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) or DeleteShareGroupOffsets (92)
// pinned: a share group accepts a partition's four records and its member leaves; two more
// records arrive. The group's offsets are described (beside a missing group), altered back to
// offset 1 (a topic that does not exist refused), described, deleted (the missing group refused)
// and described again.
func sweepShareOffsets(r *run) {
	topic, group, missing, nope := r.topic("so", 1, nil), r.name("grp"), r.name("missing"), r.name("nope")
	r.shareFromEarliest(group)
	prod := r.produceShareRecords(topic, "o")
	cl := r.plain(kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	got := r.consume("consumed", 4, cl)
	cl.MarkAcks(kgo.AckAccept, got...)
	r.must(cl.FlushAcks(r.ctx), "flush acks")
	cl.Close()
	r.produce(prod, "produced", rec(topic, 0, "o4", "later", base+4), rec(topic, 0, "o5", "later", base+5))
	r.awaitShareGroupState(group, "Empty")
	describer, alterer, deleter := r.admin(), r.admin(), r.admin()
	switch pinned := kadm.NewClient(r.pinned()); r.key {
	case 90:
		describer = pinned
	case 91:
		alterer = pinned
	case 92:
		deleter = pinned
	}
	r.describeShareOffsets(describer, "described", group, missing)
	var offsets kadm.Offsets
	offsets.AddOffset(topic, 0, 1, -1)
	offsets.AddOffset(nope, 0, 0, -1)
	altered, err := alterer.AlterShareGroupOffsets(r.ctx, group, offsets)
	results := []string{}
	for t, ps := range altered {
		for p, perr := range ps {
			results = append(results, fmt.Sprintf("%s/%d err=%s", r.strip(t), p, errName(perr)))
		}
	}
	sort.Strings(results)
	r.emit(obs{"step": "altered", "err": errName(err), "results": results})
	r.describeShareOffsets(describer, "described-altered", group)
	for _, g := range []string{group, missing} {
		deleted, err := deleter.DeleteShareGroupOffsets(r.ctx, g, topic, nope)
		results := []string{}
		for t, terr := range deleted {
			results = append(results, fmt.Sprintf("%s err=%s", r.strip(t), errName(terr)))
		}
		sort.Strings(results)
		r.emit(obs{"step": "deleted", "group": r.strip(g), "err": errName(err), "results": results})
	}
	r.describeShareOffsets(describer, "described-deleted", group)
}

func (r *run) strip(name string) string { return strings.TrimPrefix(name, r.prefix+"-") }

// awaitShareGroupState waits (up to 10 s) until the share group is described in `state`: a member
// that closed has left once the coordinator has applied its leave heartbeat.
func (r *run) awaitShareGroupState(group, state string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		described, err := r.admin().DescribeShareGroups(r.ctx, group)
		if g, ok := described[group]; err == nil && ok && g.GroupState == state {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.fail("share group %s never %s", group, state)
}

func (r *run) describeShareOffsets(adm *kadm.Client, step string, groups ...string) {
	described, err := adm.DescribeShareGroupOffsets(r.ctx, groups...)
	if _, shard := err.(*kadm.ShardErrors); err != nil && !shard {
		r.must(err, "describe share group offsets")
	}
	for _, group := range groups {
		g, ok := described[group]
		if !ok {
			r.emit(obs{"step": step, "group": r.strip(group), "present": false})
			continue
		}
		parts := []string{}
		for t, ps := range g.Offsets {
			for p, o := range ps {
				parts = append(parts, fmt.Sprintf("%s/%d start=%d epoch=%d lag=%d err=%s",
					r.strip(t), p, o.StartOffset, o.LeaderEpoch, o.Lag, errName(o.Err)))
			}
		}
		sort.Strings(parts)
		r.emit(obs{"step": step, "group": r.strip(group), "present": true, "err": errName(g.Err), "partitions": parts})
	}
}
