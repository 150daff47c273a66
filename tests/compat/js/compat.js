// kafkajs driver for tests/compat/test_kafkajs.py.
// Usage: node compat.js <request.json>   -> prints one JSON result on stdout.
// Request: {"op": ..., "bootstrap": "127.0.0.1:PORT", ...}. Bytes travel as base64, null as null.
//
// kafkajs's consumer always joins a consumer group and has no assign(); Skiff has no group
// coordinator yet, so "fetch" reads records without a group through kafkajs's own cluster and
// broker objects (the same Fetch request code and record-batch decoding its consumer uses).
'use strict'

const fs = require('fs')
const { Kafka, CompressionTypes, ConfigResourceTypes, logLevel } = require('kafkajs')

const b64 = buf => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))
const unb64 = s => (s === null || s === undefined ? null : Buffer.from(s, 'base64'))

function client(req) {
  return new Kafka({
    clientId: 'skiff-compat',
    brokers: [req.bootstrap],
    logLevel: logLevel.ERROR,
    connectionTimeout: 5000,
    requestTimeout: 20000,
    retry: { retries: 3, initialRetryTime: 100 },
    // TLS: {"ca": path, "cert": path, "key": path} (test_security_*.py)
    ssl: req.ssl ? {
      ca: [fs.readFileSync(req.ssl.ca, 'utf-8')],
      ...(req.ssl.cert ? { cert: fs.readFileSync(req.ssl.cert, 'utf-8') } : {}),
      ...(req.ssl.key ? { key: fs.readFileSync(req.ssl.key, 'utf-8') } : {}),
    } : undefined,
    sasl: req.sasl || undefined,
  })
}

function privateCluster(kafka) {
  const sym = Object.getOwnPropertySymbols(kafka).find(
    s => s.description === 'private:Kafka:createCluster'
  )
  if (!sym) throw new Error('kafkajs internals changed: no createCluster symbol')
  return kafka[sym]({ metadataMaxAge: 300000, allowAutoTopicCreation: false })
}

function headersToList(headers) {
  const out = []
  for (const [k, v] of Object.entries(headers || {})) {
    for (const one of Array.isArray(v) ? v : [v]) out.push([k, b64(one)])
  }
  return out
}

function listToHeaders(list) {
  const obj = {}
  for (const [k, v] of list) {
    const val = unb64(v)
    if (obj[k] === undefined) obj[k] = val
    else if (Array.isArray(obj[k])) obj[k].push(val)
    else obj[k] = [obj[k], val]
  }
  return obj
}

const ops = {
  // Transactions (test_transactions_kafkajs.py): req.transactions is a list of
  // {topic, partition, values (base64), commit}, each one transaction of one producer.
  async txn(req) {
    const producer = client(req).producer({
      transactionalId: req.transactionalId, idempotent: true, maxInFlightRequests: 1,
    })
    await producer.connect()
    try {
      for (const t of req.transactions) {
        const txn = await producer.transaction()
        await txn.send({
          topic: t.topic,
          messages: t.values.map(v => ({ value: unb64(v), partition: t.partition || 0 })),
        })
        if (t.commit) await txn.commit()
        else await txn.abort()
      }
      return { done: req.transactions.length }
    } finally {
      await producer.disconnect()
    }
  },
  // A second producer with the same transactionalId fences the first: the first's commit
  // must fail; the second's transaction commits.
  async txnFence(req) {
    const kafka = client(req)
    const opts = { transactionalId: req.transactionalId, idempotent: true, maxInFlightRequests: 1 }
    const first = kafka.producer(opts)
    await first.connect()
    const second = kafka.producer(opts)
    try {
      const t1 = await first.transaction()
      await t1.send({ topic: req.topic, messages: [{ value: 'from-the-zombie', partition: 0 }] })
      await second.connect()
      const t2 = await second.transaction()
      await t2.send({ topic: req.topic, messages: [{ value: 'from-the-new-one', partition: 0 }] })
      await t2.commit()
      let error = null
      try {
        await t1.commit()
      } catch (e) {
        error = { type: e.type || e.name, message: e.message }
      }
      return { error }
    } finally {
      await first.disconnect().catch(() => {})
      await second.disconnect().catch(() => {})
    }
  },
  async metadata(req) {
    const admin = client(req).admin()
    await admin.connect()
    try {
      const cluster = await admin.describeCluster()
      const topics = await admin.listTopics()
      let topicMetadata = null
      if (req.topic) topicMetadata = await admin.fetchTopicMetadata({ topics: [req.topic] })
      return { cluster, topics, topicMetadata }
    } finally {
      await admin.disconnect()
    }
  },

  async create(req) {
    const admin = client(req).admin()
    await admin.connect()
    try {
      const created = await admin.createTopics({
        validateOnly: !!req.validateOnly,
        waitForLeaders: !req.validateOnly,
        timeout: 20000,
        topics: [
          {
            topic: req.topic,
            numPartitions: req.partitions,
            replicationFactor: 1,
            configEntries: Object.entries(req.config || {}).map(([name, value]) => ({ name, value })),
          },
        ],
      })
      return { created }
    } finally {
      await admin.disconnect()
    }
  },

  async describeConfigs(req) {
    const admin = client(req).admin()
    await admin.connect()
    try {
      const res = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: req.topic }],
      })
      return res
    } finally {
      await admin.disconnect()
    }
  },

  async delete(req) {
    const admin = client(req).admin()
    await admin.connect()
    try {
      await admin.deleteTopics({ topics: [req.topic], timeout: 20000 })
      return { deleted: true }
    } finally {
      await admin.disconnect()
    }
  },

  async produce(req) {
    const producer = client(req).producer({ allowAutoTopicCreation: false, idempotent: false })
    await producer.connect()
    try {
      const compression = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }[req.codec]
      if (compression === undefined) throw new Error(`kafkajs has no built-in codec ${req.codec}`)
      // one send per partition run keeps the records' order within each partition
      const results = []
      for (const batch of req.batches) {
        const meta = await producer.send({
          topic: req.topic,
          acks: -1,
          timeout: 20000,
          compression,
          messages: batch.map(r => ({
            partition: r.partition,
            key: unb64(r.key),
            value: unb64(r.value),
            headers: listToHeaders(r.headers),
            timestamp: String(r.timestamp_ms),
          })),
        })
        results.push(meta)
      }
      return { results }
    } finally {
      await producer.disconnect()
    }
  },

  async offsets(req) {
    const admin = client(req).admin()
    await admin.connect()
    try {
      const out = { latest: await admin.fetchTopicOffsets(req.topic) }
      if (req.timestamps) {
        out.byTimestamp = {}
        for (const ts of req.timestamps) {
          out.byTimestamp[ts] = await admin.fetchTopicOffsetsByTimestamp(req.topic, ts)
        }
      }
      return out
    } finally {
      await admin.disconnect()
    }
  },

  // Group-less fetch of `count` records from `offset` ("earliest", "latest" or a number) of one
  // partition. With produceAfterPositioning, resolves the start offset first, then produces
  // that batch, then fetches: "consume from latest".
  async fetch(req) {
    const kafka = client(req)
    const cluster = privateCluster(kafka)
    await cluster.connect()
    try {
      await cluster.addTargetTopic(req.topic)
      await cluster.refreshMetadata()
      let offset = req.offset
      if (offset === 'earliest' || offset === 'latest') {
        const [res] = await cluster.fetchTopicsOffset([
          {
            topic: req.topic,
            fromBeginning: offset === 'earliest',
            partitions: [{ partition: req.partition }],
          },
        ])
        offset = res.partitions[0].offset
      }
      const resolved = String(offset)
      let produced = null
      if (req.produceAfterPositioning) {
        produced = await ops.produce({ ...req.produceAfterPositioning, bootstrap: req.bootstrap })
      }
      const leader = cluster
        .findTopicPartitionMetadata(req.topic)
        .find(p => p.partitionId === req.partition).leader
      const broker = await cluster.findBroker({ nodeId: String(leader) })
      const records = []
      let next = BigInt(resolved)
      const deadline = Date.now() + (req.timeoutMs || 20000)
      let highWatermark = null
      while (records.length < req.count && Date.now() < deadline) {
        const resp = await broker.fetch({
          maxWaitTime: 100,
          minBytes: 1,
          maxBytes: 10485760,
          isolationLevel: 1,
          topics: [
            {
              topic: req.topic,
              partitions: [
                { partition: req.partition, fetchOffset: next.toString(), maxBytes: 5242880 },
              ],
            },
          ],
        })
        for (const t of resp.responses) {
          for (const p of t.partitions) {
            if (p.errorCode !== 0) throw new Error(`fetch error code ${p.errorCode}`)
            highWatermark = p.highWatermark
            for (const m of p.messages) {
              if (m.isControlRecord) continue
              // a batch may start before the requested offset: skip what precedes it
              if (BigInt(m.offset) < next) continue
              records.push({
                partition: p.partition,
                offset: Number(m.offset),
                timestamp_ms: Number(m.timestamp),
                key: b64(m.key),
                value: b64(m.value),
                headers: headersToList(m.headers),
              })
              next = BigInt(m.offset) + 1n
            }
          }
        }
      }
      return { resolved: Number(resolved), records, produced, highWatermark }
    } finally {
      await cluster.disconnect()
    }
  },
}

async function main() {
  const req = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
  const op = ops[req.op]
  if (!op) throw new Error(`unknown op ${req.op}`)
  const result = await op(req)
  process.stdout.write(JSON.stringify(result))
}

main().catch(err => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`)
  if (err && err.type) process.stderr.write(`kafkajs error type: ${err.type}\n`)
  process.exit(1)
})
