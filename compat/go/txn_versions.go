// The version sweep's transaction keys (see versions.go): AddPartitionsToTxn and EndTxn through a
// transactional producer, AddOffsetsToTxn and TxnOffsetCommit through a GroupTransactSession
// (consume-transform-produce), and DescribeProducers, DescribeTransactions, ListTransactions and
// WriteTxnMarkers around a transaction left open (the marker is what kafka-transactions.sh abort
// sends). Transactional clients here keep EndTxn at v4 or below: that keeps franz-go on
// transactions v1 (KIP-890 part 1, explicit AddPartitionsToTxn/AddOffsetsToTxn, which v2 never
// sends) although both brokers finalize transaction.version 2; a sweep of EndTxn v5+ or
// TxnOffsetCommit v5+ lets it run transactions v2 instead (franz-go sends TxnOffsetCommit v5 only
// then).
package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func init() {
	sweeps[24] = sweepTxn // AddPartitionsToTxn
	sweeps[26] = sweepTxn // EndTxn
	sweeps[25] = sweepGroupTxn
	sweeps[28] = sweepGroupTxn
	sweeps[27] = sweepTxnAdmin // WriteTxnMarkers
	sweeps[61] = sweepTxnAdmin
	sweeps[65] = sweepTxnAdmin
	sweeps[66] = sweepTxnAdmin
}

// txnVersions caps EndTxn at v4 (transactions v1) unless the run pins TxnOffsetCommit v5+, and
// pins the run's key when `pin` is set.
func (r *run) txnVersions(pin bool) []kgo.Opt {
	maxs := kversion.Stable()
	if !(pin && r.key == int16(kmsg.TxnOffsetCommit) && r.v >= 5) {
		maxs.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	}
	if !pin {
		return []kgo.Opt{kgo.MaxVersions(maxs)}
	}
	maxs.SetMaxKeyVersion(r.key, r.v)
	mins := new(kversion.Versions)
	mins.SetMaxKeyVersion(r.key, r.v)
	return []kgo.Opt{kgo.MaxVersions(maxs), kgo.MinVersions(mins), kgo.WithHooks(r)}
}

func (r *run) end(cl *kgo.Client, commit kgo.TransactionEndTry, step string) {
	err := cl.EndTransaction(r.ctx, commit)
	r.emit(obs{"step": step, "err": errName(err)})
}

// AddPartitionsToTxn / EndTxn pinned: a transaction committed over two partitions, one aborted,
// one committed; a read_committed consumer sees the committed records (the markers take offsets),
// a read_uncommitted one all of them.
func sweepTxn(r *run) {
	topic := r.topic("txn", 2, nil)
	cl := r.client(append(r.txnVersions(true), manual, kgo.TransactionalID(r.name("tid")))...)
	r.must(cl.BeginTransaction(), "begin")
	r.produce(cl, "produced", rec(topic, 0, "k0", "v0", base), rec(topic, 1, "k1", "v1", base+1))
	r.end(cl, kgo.TryCommit, "committed")
	r.must(cl.BeginTransaction(), "begin")
	r.produce(cl, "produced-aborted", rec(topic, 0, "k2", "aborted", base+2))
	r.end(cl, kgo.TryAbort, "aborted")
	r.must(cl.BeginTransaction(), "begin")
	r.produce(cl, "produced", rec(topic, 0, "k3", "v3", base+3))
	r.end(cl, kgo.TryCommit, "committed")
	r.consume("read_committed", 3, r.plain(assign(topic, 2, kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted())))
	r.consume("read_uncommitted", 4, r.plain(assign(topic, 2, kgo.NewOffset().AtStart())))
}

// AddOffsetsToTxn / TxnOffsetCommit pinned: a GroupTransactSession moves three records from one
// topic to another, committing its consumer's offsets in each transaction; the output is read
// read_committed and the group's offsets are read back.
func sweepGroupTxn(r *run) {
	src, dst, group := r.topic("src", 1, nil), r.topic("dst", 1, nil), r.name("grp")
	r.produce(r.plain(manual), "input", rec(src, 0, "a", "x", base), rec(src, 0, "b", "y", base+1), rec(src, 0, "c", "z", base+2))
	opts := append(r.txnVersions(true), kgo.SeedBrokers(r.bootstrap), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.TransactionalID(r.name("tid")), kgo.ConsumerGroup(group), kgo.ConsumeTopics(src),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()), manual)
	sess, err := kgo.NewGroupTransactSession(opts...)
	r.must(err, "group transact session")
	defer sess.Close()
	ctx, cancel := context.WithTimeout(r.ctx, 60*time.Second)
	defer cancel()
	moved := 0
	for moved < 3 {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			r.fail("moved %d of 3 records", moved)
		}
		fs.EachError(func(t string, p int32, err error) { r.fail("fetch %s/%d: %v", t, p, err) })
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		r.must(sess.Begin(), "begin")
		for _, in := range recs {
			out := rec(dst, 0, string(in.Key), strings.ToUpper(string(in.Value)), in.Timestamp.UnixMilli())
			r.must(sess.ProduceSync(ctx, out).FirstErr(), "produce")
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		r.must(err, "end")
		if committed {
			moved += len(recs)
		}
	}
	r.emit(obs{"step": "moved", "n": moved})
	r.consume("output", 3, r.plain(assign(dst, 1, kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted())))
	r.committed(r.admin(), group, "committed")
}

// DescribeProducers, DescribeTransactions, ListTransactions, WriteTxnMarkers pinned: a producer
// commits one transaction and leaves a second open; the open one is described, listed and
// described from the partition's side, then ended by an ABORT marker written to the partition
// leader (the producer's epoch and the coordinator epoch DescribeProducers reports), after which
// read_committed reads past it.
func sweepTxnAdmin(r *run) {
	topic, tid := r.topic("ta", 1, nil), r.name("tid")
	prod := r.client(append(r.txnVersions(false), manual, kgo.TransactionalID(tid),
		kgo.TransactionTimeout(60*time.Second))...)
	r.must(prod.BeginTransaction(), "begin")
	r.produce(prod, "produced", rec(topic, 0, "k0", "v0", base))
	r.end(prod, kgo.TryCommit, "committed")
	r.must(prod.BeginTransaction(), "begin")
	r.produce(prod, "produced-open", rec(topic, 0, "k1", "open", base+1), rec(topic, 0, "k2", "open", base+2))
	pinned := r.client(r.txnVersions(true)...)
	adm := kadm.NewClient(pinned)

	described, err := adm.DescribeTransactions(r.ctx, tid)
	r.must(err, "describe transactions")
	for _, d := range described.Sorted() {
		var parts []string
		for t, ps := range d.Topics {
			for p := range ps {
				parts = append(parts, fmt.Sprintf("%s-%d", strings.TrimPrefix(t, r.prefix+"-"), p))
			}
		}
		sort.Strings(parts)
		r.emit(obs{"step": "described", "state": d.State, "timeoutMs": d.TimeoutMillis,
			"started": d.StartTimestamp > 0, "partitions": parts, "err": errName(d.Err)})
	}
	missing, err := adm.DescribeTransactions(r.ctx, r.name("missing"))
	r.must(err, "describe a missing transactional id")
	for _, d := range missing.Sorted() {
		r.emit(obs{"step": "described-missing", "err": errName(d.Err)})
	}

	var listed kadm.ListedTransactions
	if r.key == 66 && r.v >= 2 {
		listed, err = adm.ListTransactionsByTxPattern(r.ctx, nil, nil, r.prefix+"-t.d")
	} else {
		listed, err = adm.ListTransactions(r.ctx, nil, []string{"Ongoing", "NoSuchState"})
	}
	r.must(err, "list transactions")
	for _, l := range listed.Sorted() {
		if strings.HasPrefix(l.TxnID, r.prefix+"-") {
			r.emit(obs{"step": "listed", "id": strings.TrimPrefix(l.TxnID, r.prefix+"-"), "state": l.State})
		}
	}

	producers, err := adm.DescribeProducers(r.ctx, kadm.TopicsSet{topic: {0: {}}})
	r.must(err, "describe producers")
	var open kadm.DescribedProducer
	found := false
	producers.EachPartition(func(p kadm.DescribedProducersPartition) {
		r.emit(obs{"step": "producers", "partition": p.Partition, "n": len(p.ActiveProducers), "err": errName(p.Err)})
		for _, s := range p.ActiveProducers.Sorted() {
			r.emit(obs{"step": "producer", "partition": p.Partition, "lastSequence": s.LastSequence,
				"txnStart": s.CurrentTxnStartOffset, "coordinatorEpoch": s.CoordinatorEpoch >= 0,
				"lastTimestamp": s.LastTimestamp})
			open, found = s, true
		}
	})
	if !found {
		r.fail("no active producer on %s-0", topic)
	}

	markerAdm := r.admin()
	if r.key == 27 {
		markerAdm = adm
	}
	written, err := markerAdm.WriteTxnMarkers(r.ctx, kadm.TxnMarkers{ProducerID: open.ProducerID,
		ProducerEpoch: open.ProducerEpoch, CoordinatorEpoch: open.CoordinatorEpoch, Topics: kadm.TopicsSet{topic: {0: {}}}})
	r.must(err, "write txn markers")
	for _, m := range written.Sorted() {
		for _, p := range m.Topics.SortedPartitions() {
			r.emit(obs{"step": "marker", "partition": p.Partition, "err": errName(p.Err)})
		}
	}
	r.consume("read_committed", 1, r.plain(assign(topic, 1, kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted())))
	lo, err := r.admin().ListEndOffsets(r.ctx, topic)
	r.must(err, "list end offsets")
	lo.Each(func(o kadm.ListedOffset) { r.emit(obs{"step": "end", "partition": o.Partition, "offset": o.Offset}) })
}
