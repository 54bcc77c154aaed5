// A kafkajs transactional producer against BROKER (argv[2]); prints one JSON line with the
// error kafkajs raised (or {"ok": true}). Retries are set high on purpose: a retriable
// answer would keep kafkajs busy far past the test's deadline.
const { Kafka, logLevel } = require('kafkajs');

const kafka = new Kafka({ brokers: [process.argv[2]], clientId: 'compat-txn',
  logLevel: logLevel.NOTHING, retry: { retries: 12, initialRetryTime: 300 } });

(async () => {
  const producer = kafka.producer({ transactionalId: 'compat-txn', idempotent: true,
    maxInFlightRequests: 1 });
  let out;
  try {
    await producer.connect();
    await producer.transaction();
    out = { ok: true };
  } catch (e) {
    out = { ok: false, name: e.name, type: e.type || null, message: e.message,
      retriable: e.retriable };
  }
  console.log(JSON.stringify(out));
  try { await producer.disconnect(); } catch (e) { /* already closed */ }
  process.exit(0);
})();
