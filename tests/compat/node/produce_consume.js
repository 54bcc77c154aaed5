// kafkajs idempotent producer, then a consumer group reading it back, against BROKER
// (argv[2]) on TOPIC (argv[3]) with COUNT (argv[4]) messages. Prints one JSON line.
const { Kafka, logLevel } = require('kafkajs');

const [broker, topic, countText] = process.argv.slice(2);
const count = parseInt(countText, 10);
const kafka = new Kafka({ brokers: [broker], clientId: 'compat-pc',
  logLevel: logLevel.NOTHING, retry: { retries: 5 } });

(async () => {
  const out = { ok: false };
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  const consumer = kafka.consumer({ groupId: `${topic}-group`, sessionTimeout: 10000,
    heartbeatInterval: 500 });
  try {
    await producer.connect();
    const acks = [];
    for (let i = 0; i < count; i += 10) {
      const messages = [];
      for (let j = i; j < Math.min(i + 10, count); j++) {
        messages.push({ key: `k${j % 4}`, value: `v${j}` });
      }
      acks.push(...await producer.send({ topic, acks: -1, messages }));
    }
    out.acked = acks.length;
    await producer.disconnect();

    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const seen = [];
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${seen.length} of ${count}`)), 45000);
      consumer.run({ eachMessage: async ({ partition, message }) => {
        seen.push(message.value.toString());
        if (seen.length >= count) { clearTimeout(timer); resolve(); }
      } }).catch(reject);
    });
    out.consumed = seen;
    await consumer.stop();
    const admin = kafka.admin();
    await admin.connect();
    const offsets = await admin.fetchOffsets({ groupId: `${topic}-group`, topics: [topic] });
    out.committed = offsets[0].partitions.map((p) => Number(p.offset))
      .reduce((a, b) => a + Math.max(b, 0), 0);
    const groups = await admin.describeGroups([`${topic}-group`]);
    out.groupState = groups.groups[0].state;
    await admin.disconnect();
    out.ok = true;
  } catch (e) {
    out.error = `${e.name}: ${e.message}`;
  }
  console.log(JSON.stringify(out));
  try { await consumer.disconnect(); } catch (e) { /* closed */ }
  process.exit(0);
})();
