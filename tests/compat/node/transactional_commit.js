// A kafkajs transactional producer against BROKER (argv[2]) on TOPIC (argv[3]): one
// transaction committed (values k-c0, k-c1), one aborted (k-a0); prints one JSON line:
// {"ok": true} or the error kafkajs raised.
const { Kafka, logLevel } = require('kafkajs');

const kafka = new Kafka({ brokers: [process.argv[2]], clientId: 'compat-txn-commit',
  logLevel: logLevel.NOTHING, retry: { retries: 8, initialRetryTime: 100 } });
const topic = process.argv[3];

(async () => {
  const producer = kafka.producer({ transactionalId: 'kafkajs-txn', idempotent: true,
    maxInFlightRequests: 1 });
  let out;
  try {
    await producer.connect();
    let txn = await producer.transaction();
    await txn.send({ topic, messages: [{ value: 'k-c0' }, { value: 'k-c1' }] });
    await txn.commit();
    txn = await producer.transaction();
    await txn.send({ topic, messages: [{ value: 'k-a0' }] });
    await txn.abort();
    out = { ok: true };
  } catch (e) {
    out = { ok: false, name: e.name, type: e.type || null, message: e.message,
      retriable: e.retriable };
  }
  console.log(JSON.stringify(out));
  try { await producer.disconnect(); } catch (e) { /* already closed */ }
  process.exit(0);
})();
