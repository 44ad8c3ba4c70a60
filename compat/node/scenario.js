#!/usr/bin/env node
// kafkajs side of the differential compat suite: runs one scenario against a broker and prints what
// the client observes, one JSON object per line (compat/test_go_node_clients.py compares the output
// between Samsa and Apache Kafka).
//
//   node scenario.js <bootstrap> <scenario> <topic-prefix>
//
// Scenarios (the same names and steps as compat/go/main.go, within what kafkajs can do):
//   produce-consume  idempotent producer with keys, values, headers and explicit timestamps, one
//                    batch gzip-compressed and one uncompressed (kafkajs 2.2.4 has only gzip built in:
//                    snappy, lz4 and zstd need codec plugins, so they are not exercised here), to a
//                    CreateTime topic and a LogAppendTime topic; read back from the start. kafkajs has
//                    no manual partition assignment, so "from the start" is a fresh consumer group
//                    with fromBeginning.
//   group            a consumer group committing after every batch (kafkajs's default autoCommit),
//                    committed offsets and group descriptions through the admin client, a second
//                    member resuming from the commits
//   admin            list offsets (earliest/latest, by timestamp), topic metadata, create and delete
//                    topics with their errors, describeCluster
'use strict'

const { Kafka, CompressionTypes, logLevel, AssignerProtocol } = require('kafkajs')

const [bootstrap, scenario, prefix] = process.argv.slice(2)
if (!prefix) {
  process.stderr.write('usage: scenario.js <bootstrap> <scenario> <topic-prefix>\n')
  process.exit(2)
}

const BASE = 1600000000000n // explicit record timestamps: 2020-09-13

const emit = o => process.stdout.write(JSON.stringify(o) + '\n')

// client logs go to stderr; stdout carries only observations
const logCreator = () => ({ namespace, level, label, log }) => {
  process.stderr.write(`${label} [${namespace}] ${log.message} ${JSON.stringify(log)}\n`)
}

const kafka = new Kafka({
  clientId: 'samsa-compat-node',
  brokers: [bootstrap],
  logLevel: logLevel.WARN,
  logCreator,
  retry: { retries: 5, initialRetryTime: 100 },
})

const ts = t => {
  const ms = Number(t)
  return Math.abs(Date.now() - ms) < 600000 ? 'broker-now' : ms
}
const text = b => (b === null || b === undefined ? null : b.toString().slice(0, 20))
const headers = hs => {
  const rows = []
  for (const [k, v] of Object.entries(hs || {})) {
    for (const one of Array.isArray(v) ? v : [v]) rows.push([k, text(one)])
  }
  return rows
}
const byPartitionOffset = (a, b) =>
  a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition || a.offset - b.offset

async function createTopic(admin, topic, numPartitions, configEntries = []) {
  let err = ''
  let created
  try {
    created = await admin.createTopics({ topics: [{ topic, numPartitions, configEntries }], waitForLeaders: true })
  } catch (e) {
    err = e.errors ? e.errors.map(x => x.type).join(',') : e.type || String(e)
  }
  emit({ step: 'create', topic, created: created === undefined ? null : created, err })
}

async function produce(producer, topic, compression, messages) {
  const meta = await producer.send({ topic, compression, acks: -1, messages })
  // kafkajs reports one base offset per partition; records of a partition follow in order
  const rows = []
  for (const m of meta) {
    const mine = messages.filter(x => (x.partition === undefined ? 0 : x.partition) === m.partition)
    mine.forEach((x, i) => {
      rows.push({
        step: 'produced', topic: m.topicName, partition: m.partition, offset: Number(m.baseOffset) + i,
        errorCode: m.errorCode, logAppendTime: m.logAppendTime === '-1' ? -1 : ts(m.logAppendTime),
      })
    })
  }
  rows.sort(byPartitionOffset).forEach(emit)
}

function consumedRow(topic, partition, m) {
  return {
    step: 'consumed', topic, partition, offset: Number(m.offset), key: text(m.key), value: text(m.value),
    valueLen: m.value ? m.value.length : 0, headers: headers(m.headers), timestamp: ts(m.timestamp),
  }
}

// joins `groupId`, collects n records from `topics` (committing after every batch), optionally
// describes the group while it is a member, then leaves
async function consumeInGroup(groupId, topics, n, onDone = async () => {}) {
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 500, sessionTimeout: 30000, retry: { retries: 5 } })
  await consumer.connect()
  for (const topic of topics) await consumer.subscribe({ topic, fromBeginning: true })
  const rows = []
  let resolveAll
  const all = new Promise(resolve => (resolveAll = resolve))
  await consumer.run({
    eachMessage: async ({ topic, partition, message }) => {
      rows.push(consumedRow(topic, partition, message))
      if (rows.length >= n) resolveAll()
    },
  })
  const timer = setTimeout(() => {
    process.stderr.write(`timed out after ${rows.length} of ${n} records\n`)
    process.exit(1)
  }, 90000)
  await all
  clearTimeout(timer)
  await new Promise(r => setTimeout(r, 200)) // let the batch's auto-commit finish
  await consumer.commitOffsets([]).catch(() => {})
  await onDone()
  await consumer.disconnect()
  rows.sort(byPartitionOffset).forEach(emit)
}

async function describeGroup(admin, groupId, step) {
  const { groups } = await admin.describeGroups([groupId])
  const g = groups[0]
  const assigned = []
  for (const m of g.members) {
    const a = AssignerProtocol.MemberAssignment.decode(m.memberAssignment)
    for (const [t, ps] of Object.entries((a && a.assignment) || {})) for (const p of ps) assigned.push(`${t}/${p}`)
  }
  assigned.sort()
  emit({ step, errorCode: g.errorCode, state: g.state, protocolType: g.protocolType, protocol: g.protocol,
    members: g.members.length, assigned })
}

async function committed(admin, groupId, topic, step) {
  const res = await admin.fetchOffsets({ groupId, topics: [topic] })
  for (const t of res) {
    for (const p of [...t.partitions].sort((a, b) => a.partition - b.partition)) {
      emit({ step, topic: t.topic, partition: p.partition, offset: Number(p.offset), metadata: p.metadata })
    }
  }
}

async function produceConsume(admin) {
  const topic = `${prefix}-pc`
  const lat = `${prefix}-lat`
  await createTopic(admin, topic, 1)
  await createTopic(admin, lat, 1, [{ name: 'message.timestamp.type', value: 'LogAppendTime' }])
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const t = d => (BASE + BigInt(d)).toString()
  await produce(producer, topic, CompressionTypes.GZIP, [
    { key: 'k0', value: 'v0', headers: { h1: 'a', h2: '' }, timestamp: t(0) },
    { key: null, value: 'v1', timestamp: t(1) },
    { key: 'k2', value: null, headers: { h: ['x', 'y'] }, timestamp: t(-5) },
    { key: 'k3', value: 'abcdefg'.repeat(430), timestamp: t(2) },
  ])
  await produce(producer, topic, CompressionTypes.None, [{ key: 'k4', value: 'v4', timestamp: t(3) }])
  await produce(producer, lat, CompressionTypes.None, [
    { key: 'l0', value: 'x', timestamp: t(0) },
    { key: 'l1', value: 'y', timestamp: t(1) },
  ])
  await producer.disconnect()
  await consumeInGroup(`${prefix}-pc-reader`, [lat, topic], 7)
}

async function group(admin) {
  const topic = `${prefix}-grp`
  const groupId = `${prefix}-g`
  await createTopic(admin, topic, 2)
  const producer = kafka.producer()
  await producer.connect()
  const first = []
  for (let i = 0; i < 6; i++) {
    first.push({ partition: i % 2, key: `g${i}`, value: `first-${i}`, timestamp: (BASE + BigInt(i)).toString() })
  }
  await produce(producer, topic, CompressionTypes.None, first)
  await consumeInGroup(groupId, [topic], 6, () => describeGroup(admin, groupId, 'described-active'))
  await committed(admin, groupId, topic, 'committed')
  await describeGroup(admin, groupId, 'described-left')
  await produce(producer, topic, CompressionTypes.None, [
    { partition: 0, key: 'g6', value: 'second-6', timestamp: (BASE + 6n).toString() },
    { partition: 1, key: 'g7', value: 'second-7', timestamp: (BASE + 7n).toString() },
  ])
  await producer.disconnect()
  await consumeInGroup(groupId, [topic], 2) // resumes from the commits: only the new two
  await committed(admin, groupId, topic, 'committed-again')
}

async function adminScenario(admin) {
  const topic = `${prefix}-adm`
  const doomed = `${prefix}-doomed`
  await createTopic(admin, topic, 3)
  await createTopic(admin, topic, 3) // already exists: kafkajs answers false
  await createTopic(admin, `${prefix}bad name!`, 1) // INVALID_TOPIC_EXCEPTION
  await createTopic(admin, doomed, 1)
  const producer = kafka.producer()
  await producer.connect()
  const t = d => (BASE + BigInt(d)).toString()
  await produce(producer, topic, CompressionTypes.None, [
    { partition: 0, value: 'a', timestamp: t(1000) },
    { partition: 0, value: 'b', timestamp: t(2000) },
    { partition: 0, value: 'c', timestamp: t(3000) },
    { partition: 1, value: 'd', timestamp: t(500) },
  ])
  await producer.disconnect()
  const sorted = rows => [...rows].sort((a, b) => a.partition - b.partition)
  for (const o of sorted(await admin.fetchTopicOffsets(topic))) {
    emit({ step: 'offsets', partition: o.partition, low: Number(o.low), high: Number(o.high), offset: Number(o.offset) })
  }
  for (const [step, at] of [['after-1500', BASE + 1500n], ['after-future', BASE + 10000000n]]) {
    for (const o of sorted(await admin.fetchTopicOffsetsByTimestamp(topic, Number(at)))) {
      emit({ step, partition: o.partition, offset: Number(o.offset) })
    }
  }
  const md = await admin.fetchTopicMetadata({ topics: [topic] })
  for (const tm of md.topics) {
    emit({
      step: 'described-topic', topic: tm.name,
      details: [...tm.partitions].sort((a, b) => a.partitionId - b.partitionId).map(p =>
        `p${p.partitionId} err=${p.partitionErrorCode} leader=${p.leader} replicas=${p.replicas} isr=${p.isr} offline=${p.offlineReplicas}`),
    })
  }
  await admin.deleteTopics({ topics: [doomed], timeout: 15000 })
  // Kafka's brokers learn of a deletion from the controller a moment after DeleteTopics answers:
  // list again until it is gone (10 s at most)
  let listed = await admin.listTopics()
  for (let i = 0; i < 50 && listed.includes(doomed); i++) {
    await new Promise(resolve => setTimeout(resolve, 200))
    listed = await admin.listTopics()
  }
  emit({ step: 'deleted', topic: doomed, stillListed: listed.includes(doomed), adminListed: listed.includes(topic) })
  const cluster = await admin.describeCluster()
  emit({
    step: 'cluster', hasClusterId: Boolean(cluster.clusterId), controller: cluster.controller,
    brokers: cluster.brokers.map(b => `${b.nodeId} ${b.host}`),
  })
}

async function main() {
  const admin = kafka.admin()
  await admin.connect()
  try {
    if (scenario === 'produce-consume') await produceConsume(admin)
    else if (scenario === 'group') await group(admin)
    else if (scenario === 'admin') await adminScenario(admin)
    else throw new Error(`unknown scenario ${scenario}`)
  } finally {
    await admin.disconnect()
  }
  emit({ step: 'done' })
}

main().then(
  () => process.exit(0),
  e => {
    process.stderr.write(`${e && e.stack ? e.stack : e}\n`)
    process.exit(1)
  },
)
