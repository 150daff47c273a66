// One kafkajs consumer-group member, for tests/compat/test_groups_kafkajs.py.
// Usage: node group_member.js '<json config>'   (see tests/compat/group_member.py: same
// config keys and the same JSON-lines events on stdout; "stop" on stdin closes and exits).
//
// kafkajs has no rebalance callbacks. It reports an assignment with the GROUP_JOIN
// instrumentation event (after SyncGroup, the whole assignment: kafkajs is eager) and the
// start of a rebalance with REBALANCING (its fetchers have stopped and it is about to
// rejoin); those are what this member reports as "assigned" and "revoked".
'use strict'

const { performance } = require('perf_hooks')
const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

const cfg = JSON.parse(process.argv[2])
const now = () => (performance.timeOrigin + performance.now()) / 1000
const emit = (ev, fields) =>
  process.stdout.write(JSON.stringify({ t: now(), m: cfg.name, ev, ...(fields || {}) }) + '\n')

async function main() {
  const kafka = new Kafka({
    clientId: cfg.name,
    brokers: [cfg.bootstrap],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 5000,
    requestTimeout: 20000,
    // ~60 s of retries: a node restarting on a CPU-bound CI machine took longer than the
    // ~20 s that 10 gave, and the members then restarted and rejoined (CI run 19)
    retry: { retries: 30, initialRetryTime: 100, maxRetryTime: 2000 },
  })
  const consumer = kafka.consumer({
    groupId: cfg.group,
    sessionTimeout: cfg.session_ms,
    heartbeatInterval: cfg.heartbeat_ms,
    rebalanceTimeout: 20000,
    maxWaitTimeInMs: 100,
  })
  let owned = []
  consumer.on(consumer.events.GROUP_JOIN, e => {
    owned = (e.payload.memberAssignment[cfg.topic] || []).slice().sort((a, b) => a - b)
    emit('assigned', { parts: owned })
  })
  consumer.on(consumer.events.REBALANCING, () => {
    emit('revoked', { parts: owned })
    owned = []
  })
  consumer.on(consumer.events.CRASH, e => emit('error', { err: String(e.payload.error) }))

  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    emit('closing')
    try {
      await consumer.disconnect()
    } finally {
      emit('closed')
      process.exit(0)
    }
  }
  readline.createInterface({ input: process.stdin }).on('line', line => {
    if (line.trim() === 'stop') stop()
  })
  process.stdin.on('end', stop)

  await consumer.connect()
  await consumer.subscribe({ topics: [cfg.topic], fromBeginning: true })
  emit('ready')
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      if (stopping) return
      const o = Number(message.offset)
      const v = message.value === null ? '' : message.value.toString()
      emit('msg', { p: partition, o, v })
      if (v.startsWith('c')) {
        try {
          await consumer.commitOffsets([{ topic: cfg.topic, partition, offset: String(o + 1) }])
          emit('commit', { p: partition, o: o + 1 })
        } catch (err) {
          emit('commit_failed', { p: partition, o: o + 1, err: String(err) })
        }
      }
    },
  })
}

main().catch(err => {
  emit('error', { err: String(err && err.stack ? err.stack : err) })
  process.exit(1)
})
